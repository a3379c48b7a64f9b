//! # mnemos-bert
//!
//! A BERT encoder's forward pass on the CPU, written for sentence embedding.
//!
//! [`BertEncoder::forward`] runs a batch of token sequences *packed* one after the
//! other: the linear layers multiply every token of every sequence in one matrix
//! product (the `gemm` crate, or for up to 64 tokens the `small` module's kernel, which
//! reads the weight without copying it first), and attention runs per sequence, so no token is padded
//! and no position is masked. The element-wise steps (bias, GELU, residual, layer norm,
//! softmax) are fused loops over rows instead of one tensor operation each. The values
//! are those of Hugging Face's `BertModel` in float32 (the local embedder's tests pin
//! sentence-transformers' reference vectors to 1e-4).
//!
//! It is its own crate so that debug builds of the service (its tests) still run it
//! optimised (`[profile.dev.package.mnemos-bert]` in the workspace manifest).

use std::cell::Cell;
use std::collections::HashMap;

use gemm::Parallelism;
use rayon::prelude::*;
use serde::Deserialize;

mod int8;
mod small;

use int8::{Int8Weight, Vnni};

/// Tokens one pass of the encoder takes at most (beyond one sequence); bounds the
/// activations held at once (about 4096 × 1536 floats for MiniLM's widest layer).
pub const CHUNK_TOKENS: usize = 4096;

/// Sequences shorter than this (special tokens included) run in float32 even once the
/// layers are quantized: a sentence vector averages its tokens, and over two or three
/// tokens the rounding does not average out (`ok` strayed 1.5e-3 cosine from float32's,
/// `hello world`, four tokens, 6e-4).
pub const INT8_MIN_TOKENS: usize = 8;

/// The fields of a Hugging Face BERT `config.json` the encoder reads.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    /// Rows of the word embedding table.
    pub vocab_size: usize,
    /// Width of every token vector (384 for MiniLM).
    pub hidden_size: usize,
    /// Transformer layers run one after the other.
    pub num_hidden_layers: usize,
    /// Heads the hidden width is split into for attention.
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer between the two dense layers of a block.
    pub intermediate_size: usize,
    /// The feed-forward activation (`gelu`, `gelu_new`, `gelu_pytorch_tanh`, `relu`).
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// Longest sequence the position table covers.
    pub max_position_embeddings: usize,
    /// Rows of the token-type (segment) table.
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    /// Added to the variance in every layer norm.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// The padding token (the tokenizer's default pad id when it has none).
    #[serde(default)]
    pub pad_token_id: usize,
    /// `bert` for the models this encoder runs; other types are refused at load.
    #[serde(default)]
    pub model_type: Option<String>,
    /// Only `absolute` positions are implemented.
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

/// BERT's default activation.
fn default_act() -> String {
    "gelu".to_string()
}

/// BERT's default number of segments.
fn default_type_vocab() -> usize {
    2
}

/// BERT's default layer-norm epsilon.
fn default_eps() -> f64 {
    1e-12
}

/// The feed-forward activation of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activation {
    /// `x · Φ(x)` with the exact normal CDF (Hugging Face's `gelu`).
    GeluErf,
    /// The tanh approximation of GELU (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

/// A linear layer `y = x · W + b` with `W` stored `(inputs × outputs)` row-major, so
/// the product reads both operands contiguously.
struct Dense {
    /// The weight, transposed from the file's `(outputs, inputs)` layout.
    weight: Vec<f32>,
    /// Added to every output row.
    bias: Vec<f32>,
    /// Width of an input row.
    inputs: usize,
    /// Width of an output row.
    outputs: usize,
    /// The weight again, band after band of 16 output columns (each band `inputs × 16`
    /// contiguous), so a few rows' product streams it in order (see [`small`]); empty
    /// where the CPU has no AVX2.
    bands: Vec<f32>,
    /// The weight quantized to 8 bits, once [`BertEncoder::quantize_int8`] has run.
    int8: Option<Int8Weight>,
}

impl Dense {
    /// A layer of `weight` (`inputs × outputs`, row-major) and `bias`.
    fn new(weight: Vec<f32>, bias: Vec<f32>, inputs: usize, outputs: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        let bands = if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            small::bands(&weight, inputs, outputs)
        } else {
            Vec::new()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let bands = Vec::new();
        Self {
            weight,
            bias,
            inputs,
            outputs,
            bands,
            int8: None,
        }
    }
}

/// Scale and shift of a layer norm.
struct Norm {
    /// Multiplies each normalised component.
    gamma: Vec<f32>,
    /// Added after scaling.
    beta: Vec<f32>,
}

/// One transformer block.
struct Layer {
    /// Query, key and value projections side by side (`hidden × 3·hidden`).
    qkv: Dense,
    /// Projection of the attention context back to the hidden width.
    attention_out: Dense,
    /// Layer norm after the attention's residual sum.
    attention_norm: Norm,
    /// First feed-forward layer (hidden → intermediate).
    intermediate: Dense,
    /// Second feed-forward layer (intermediate → hidden).
    output: Dense,
    /// Layer norm after the feed-forward residual sum.
    output_norm: Norm,
}

/// One token sequence of a batch: word ids and segment ids of the same length.
#[derive(Debug, Clone, Copy)]
pub struct Sequence<'a> {
    /// Word-piece ids, special tokens included.
    pub ids: &'a [u32],
    /// Segment of each token (all zero for a single sentence).
    pub type_ids: &'a [u32],
}

/// Where each sequence's tokens are in a packed batch: `(first token, length)`.
type Spans = Vec<(usize, usize)>;

/// A BERT encoder (embeddings and transformer blocks, no pooler) in float32.
pub struct BertEncoder {
    /// Word embedding table, `vocab × hidden`.
    word_embeddings: Vec<f32>,
    /// Absolute position table, `max_positions × hidden`.
    position_embeddings: Vec<f32>,
    /// Segment table, `type_vocab × hidden`.
    type_embeddings: Vec<f32>,
    /// Layer norm of the summed embeddings.
    embedding_norm: Norm,
    /// The transformer blocks in order.
    layers: Vec<Layer>,
    /// Width of a token vector.
    hidden: usize,
    /// Attention heads per block.
    heads: usize,
    /// Rows of the word table (ids at or past it are refused).
    vocab: usize,
    /// Rows of the position table: the longest sequence accepted.
    max_positions: usize,
    /// Rows of the segment table.
    type_vocab: usize,
    /// Layer-norm epsilon.
    eps: f32,
    /// The feed-forward activation.
    activation: Activation,
    /// The VNNI the linear layers run in 8 bits with, once [`BertEncoder::quantize_int8`]
    /// has quantized them; `None`: float32.
    int8: Option<Vnni>,
}

/// A weight read from the checkpoint: its shape and its values as float32.
pub struct Weight {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub values: Vec<f32>,
}

impl BertEncoder {
    /// Build the encoder from `config` and the checkpoint's tensors (names as in
    /// Hugging Face's `BertModel`, optionally under `bert.` or `<model_type>.`).
    pub fn load(config: &BertConfig, mut weights: HashMap<String, Weight>) -> Result<Self, String> {
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            ));
        }
        if let Some(kind) = config.position_embedding_type.as_deref() {
            if kind != "absolute" {
                return Err(format!(
                    "position_embedding_type `{kind}` is not supported (only `absolute`)"
                ));
            }
        }
        let activation = match config.hidden_act.as_str() {
            "gelu" => Activation::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => return Err(format!("hidden_act `{other}` is not supported")),
        };
        let prefix = [
            "",
            "bert.",
            &format!("{}.", config.model_type.as_deref().unwrap_or("bert")),
        ]
        .into_iter()
        .find(|prefix| weights.contains_key(&format!("{prefix}embeddings.word_embeddings.weight")))
        .ok_or("no tensor embeddings.word_embeddings.weight (nor under bert.)")?
        .to_string();
        let hidden = config.hidden_size;
        let mut take = |name: &str, shape: &[usize]| -> Result<Vec<f32>, String> {
            let full = format!("{prefix}{name}");
            let weight = weights
                .remove(&full)
                .ok_or_else(|| format!("no tensor {full}"))?;
            if weight.shape != shape {
                return Err(format!(
                    "tensor {full} has shape {:?}, config.json implies {shape:?}",
                    weight.shape
                ));
            }
            Ok(weight.values)
        };
        let word_embeddings = take(
            "embeddings.word_embeddings.weight",
            &[config.vocab_size, hidden],
        )?;
        let position_embeddings = take(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, hidden],
        )?;
        let type_embeddings = take(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, hidden],
        )?;
        let embedding_norm = Norm {
            gamma: take("embeddings.LayerNorm.weight", &[hidden])?,
            beta: take("embeddings.LayerNorm.bias", &[hidden])?,
        };
        let inner = config.intermediate_size;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for index in 0..config.num_hidden_layers {
            let base = format!("encoder.layer.{index}");
            let mut dense = |name: &str, inputs: usize, outputs: usize| -> Result<Dense, String> {
                let weight = take(&format!("{base}.{name}.weight"), &[outputs, inputs])?;
                let bias = take(&format!("{base}.{name}.bias"), &[outputs])?;
                Ok(Dense::new(
                    transpose(&weight, outputs, inputs),
                    bias,
                    inputs,
                    outputs,
                ))
            };
            let query = dense("attention.self.query", hidden, hidden)?;
            let key = dense("attention.self.key", hidden, hidden)?;
            let value = dense("attention.self.value", hidden, hidden)?;
            let attention_out = dense("attention.output.dense", hidden, hidden)?;
            let intermediate = dense("intermediate.dense", hidden, inner)?;
            let output = dense("output.dense", inner, hidden)?;
            let mut norm = |name: &str| -> Result<Norm, String> {
                Ok(Norm {
                    gamma: take(&format!("{base}.{name}.LayerNorm.weight"), &[hidden])?,
                    beta: take(&format!("{base}.{name}.LayerNorm.bias"), &[hidden])?,
                })
            };
            let attention_norm = norm("attention.output")?;
            let output_norm = norm("output")?;
            layers.push(Layer {
                qkv: side_by_side(&[&query, &key, &value]),
                attention_out,
                attention_norm,
                intermediate,
                output,
                output_norm,
            });
        }
        Ok(Self {
            word_embeddings,
            position_embeddings,
            type_embeddings,
            embedding_norm,
            layers,
            hidden,
            heads: config.num_attention_heads,
            vocab: config.vocab_size,
            max_positions: config.max_position_embeddings,
            type_vocab: config.type_vocab_size,
            eps: config.layer_norm_eps as f32,
            activation,
            int8: None,
        })
    }

    /// Quantize every linear layer's weight to 8 bits per output column and run the
    /// layers in integers from now on (inputs quantized per token), where the CPU has
    /// VNNI; returns whether it did (without VNNI nothing changes). The embeddings,
    /// attention, layer norms and activations stay float32.
    ///
    /// `calibration` is run once in float32 first: each input channel's largest value
    /// over it sets how much of that channel's range moves into the weight before both
    /// are rounded (SmoothQuant's migration, α = 0.4), so a few channels with large
    /// values (BERT's layer norms make some) do not coarsen every other channel's steps.
    pub fn quantize_int8(&mut self, calibration: &[Sequence<'_>]) -> Result<bool, String> {
        let Some(vnni) = Vnni::detect() else {
            return Ok(false);
        };
        let mut ranges: Vec<[Vec<f32>; 4]> = self
            .layers
            .iter()
            .map(|layer| {
                [
                    vec![0.0; layer.qkv.inputs],
                    vec![0.0; layer.attention_out.inputs],
                    vec![0.0; layer.intermediate.inputs],
                    vec![0.0; layer.output.inputs],
                ]
            })
            .collect();
        if !calibration.is_empty() {
            let (mut x, spans) = self.embed_tokens(calibration)?;
            let mut observe = |index: usize, site: Site, input: &[f32]| {
                let range = &mut ranges[index][site as usize];
                for row in input.chunks_exact(range.len()) {
                    for (largest, value) in range.iter_mut().zip(row) {
                        *largest = largest.max(value.abs());
                    }
                }
            };
            self.layers(
                &mut x,
                &spans,
                Product {
                    parallelism: Parallelism::None,
                    avx2: false,
                    int8: None,
                },
                Some(&mut observe),
            );
        }
        for (layer, ranges) in self.layers.iter_mut().zip(&ranges) {
            for ((site, dense), range) in [
                (Site::Qkv, &mut layer.qkv),
                (Site::AttentionOut, &mut layer.attention_out),
                (Site::Intermediate, &mut layer.intermediate),
                (Site::Output, &mut layer.output),
            ]
            .into_iter()
            .zip(ranges)
            {
                let ranges = (!calibration.is_empty()).then_some(range.as_slice());
                // The wide layer's inputs (a layer norm's output) and the second
                // feed-forward layer's (a GELU's) are rounded in two parts: with one,
                // a conversation's vectors strayed up to 3e-3 cosine from float32's.
                let two_parts = matches!(site, Site::Intermediate | Site::Output);
                dense.int8 = Some(Int8Weight::new(
                    &dense.weight,
                    dense.inputs,
                    dense.outputs,
                    ranges,
                    two_parts,
                ));
            }
        }
        self.int8 = Some(vnni);
        Ok(true)
    }

    /// Whether the linear layers run in 8 bits ([`BertEncoder::quantize_int8`]).
    pub fn is_int8(&self) -> bool {
        self.int8.is_some()
    }

    /// Bytes of the 8-bit weights held beside the float32 ones (0 before quantizing).
    pub fn int8_bytes(&self) -> usize {
        self.layers
            .iter()
            .flat_map(|layer| {
                [
                    &layer.qkv,
                    &layer.attention_out,
                    &layer.intermediate,
                    &layer.output,
                ]
            })
            .filter_map(|dense| dense.int8.as_ref().map(Int8Weight::bytes))
            .sum()
    }

    /// Width of the token vectors [`BertEncoder::forward`] returns.
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// The last hidden state of every token of `sequences`, packed: sequence after
    /// sequence, `hidden_size` floats per token. `parallel` lets the matrix products
    /// use the current rayon pool's threads.
    pub fn forward(&self, sequences: &[Sequence<'_>], parallel: bool) -> Result<Vec<f32>, String> {
        let short = |sequence: &Sequence<'_>| sequence.ids.len() < INT8_MIN_TOKENS;
        if self.int8.is_none() || !sequences.iter().any(short) {
            return self.forward_with(sequences, parallel, self.int8);
        }
        // Short sequences in float32, the others in 8 bits, put back in order.
        let (few, many): (Vec<_>, Vec<_>) = sequences.iter().copied().partition(|s| short(s));
        let few_states = self.forward_with(&few, parallel, None)?;
        let many_states = self.forward_with(&many, parallel, self.int8)?;
        let hidden = self.hidden;
        let (mut few_at, mut many_at) = (0, 0);
        let mut out = Vec::with_capacity(few_states.len() + many_states.len());
        for sequence in sequences {
            let width = sequence.ids.len() * hidden;
            let (states, at) = if short(sequence) {
                (&few_states, &mut few_at)
            } else {
                (&many_states, &mut many_at)
            };
            out.extend_from_slice(&states[*at..*at + width]);
            *at += width;
        }
        Ok(out)
    }

    /// [`BertEncoder::forward`] with the linear layers in 8 bits (`int8`) or float32.
    fn forward_with(
        &self,
        sequences: &[Sequence<'_>],
        parallel: bool,
        int8: Option<Vnni>,
    ) -> Result<Vec<f32>, String> {
        let parallelism = match rayon::current_num_threads() {
            threads if parallel && threads > 1 => Parallelism::Rayon(threads),
            _ => Parallelism::None,
        };
        let (mut x, spans) = self.embed_tokens(sequences)?;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA, as just checked.
            unsafe { self.layers_avx2(&mut x, &spans, parallelism, int8) };
            return Ok(x);
        }
        self.layers(
            &mut x,
            &spans,
            Product {
                parallelism,
                avx2: false,
                int8,
            },
            None,
        );
        Ok(x)
    }

    /// Check `sequences` and sum each token's word, position and segment vectors:
    /// the encoder's input (`tokens × hidden`) and each sequence's `(first token, length)`.
    fn embed_tokens(&self, sequences: &[Sequence<'_>]) -> Result<(Vec<f32>, Spans), String> {
        let hidden = self.hidden;
        let mut spans = Vec::with_capacity(sequences.len());
        let mut tokens = 0;
        for (index, sequence) in sequences.iter().enumerate() {
            let len = sequence.ids.len();
            if sequence.type_ids.len() != len {
                return Err(format!(
                    "sequence {index} has {len} ids and {} type ids",
                    sequence.type_ids.len()
                ));
            }
            if len > self.max_positions {
                return Err(format!(
                    "sequence {index} has {len} tokens; the model takes at most {}",
                    self.max_positions
                ));
            }
            spans.push((tokens, len));
            tokens += len;
        }

        // Embeddings: word + position + segment, then layer norm.
        let mut x = Vec::with_capacity(tokens * hidden);
        for sequence in sequences {
            for (position, (&id, &segment)) in
                sequence.ids.iter().zip(sequence.type_ids).enumerate()
            {
                let (id, segment) = (id as usize, segment as usize);
                if id >= self.vocab || segment >= self.type_vocab {
                    return Err(format!(
                        "token id {id} or type id {segment} is outside the model's tables"
                    ));
                }
                let word = &self.word_embeddings[id * hidden..][..hidden];
                let place = &self.position_embeddings[position * hidden..][..hidden];
                let kind = &self.type_embeddings[segment * hidden..][..hidden];
                x.extend(
                    word.iter()
                        .zip(place)
                        .zip(kind)
                        .map(|((w, p), k)| w + p + k),
                );
            }
        }
        Ok((x, spans))
    }

    /// [`BertEncoder::layers`] compiled for AVX2 and FMA (eight floats per instruction),
    /// chosen at run time on CPUs that have them.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn layers_avx2(
        &self,
        x: &mut Vec<f32>,
        spans: &[(usize, usize)],
        parallelism: Parallelism,
        int8: Option<Vnni>,
    ) {
        self.layers(
            x,
            spans,
            Product {
                parallelism,
                avx2: true,
                int8,
            },
            None,
        );
    }

    /// The embedding layer norm and every transformer block, in place on `x`
    /// (`tokens × hidden`). Inlined into each caller so the element-wise loops are
    /// vectorised for the caller's instruction set; `product` says how its linear
    /// layers multiply.
    #[inline(always)]
    fn layers(
        &self,
        x: &mut Vec<f32>,
        spans: &[(usize, usize)],
        product: Product,
        observe: Option<&mut Observer<'_>>,
    ) {
        let hidden = self.hidden;
        let wide = product.wide();
        layer_norm(x, hidden, &self.embedding_norm, self.eps, wide);
        // Taken out of the thread-local, not borrowed inside a closure: a closure
        // would be compiled without this function's instruction set. A rayon thread
        // waiting inside a pass may run another pass; that one finds no buffers and
        // makes its own.
        let mut scratch = SCRATCH.with(Cell::take);
        self.blocks(x, spans, product, &mut scratch, observe);
        scratch.shrink_if_large();
        SCRATCH.with(|cell| cell.set(scratch));
    }

    /// The transformer blocks, in place on `x`, with `scratch`'s buffers.
    #[inline(always)]
    fn blocks(
        &self,
        x: &mut Vec<f32>,
        spans: &[(usize, usize)],
        product: Product,
        scratch: &mut Scratch,
        mut observe: Option<&mut Observer<'_>>,
    ) {
        let hidden = self.hidden;
        let tokens = x.len() / hidden;
        let wide = product.wide();
        let Scratch {
            qkv,
            context,
            attended,
            inner,
            out,
            scores,
            keys,
        } = scratch;
        {
            context.clear();
            context.resize(tokens * hidden, 0.0);
            for (index, layer) in self.layers.iter().enumerate() {
                let mut seen = |site: Site, input: &[f32]| {
                    if let Some(observe) = observe.as_deref_mut() {
                        observe(index, site, input);
                    }
                };
                seen(Site::Qkv, x);
                product.linear(x, tokens, &layer.qkv, qkv);
                self.attention(qkv, spans, context, scores, keys);
                seen(Site::AttentionOut, context);
                product.linear(context, tokens, &layer.attention_out, attended);
                add_assign(attended, x);
                layer_norm(attended, hidden, &layer.attention_norm, self.eps, wide);
                seen(Site::Intermediate, attended);
                product.linear(attended, tokens, &layer.intermediate, inner);
                activate(inner, self.activation, wide);
                seen(Site::Output, inner);
                product.linear(inner, tokens, &layer.output, out);
                add_assign(out, attended);
                layer_norm(out, hidden, &layer.output_norm, self.eps, wide);
                std::mem::swap(x, out);
            }
        }
    }

    /// Scaled dot-product attention of every head within each span of tokens, written
    /// into `context` (`tokens × hidden`); `qkv` holds query, key and value per token.
    ///
    /// Per sequence and head the keys are copied transposed into `keys`, so a query's
    /// scores are `width` multiply-adds over contiguous rows of length `len`, and the
    /// context is a sum of contiguous value rows: both vectorise.
    #[inline(always)]
    fn attention(
        &self,
        qkv: &[f32],
        spans: &[(usize, usize)],
        context: &mut [f32],
        scores: &mut Vec<f32>,
        keys: &mut Vec<f32>,
    ) {
        let hidden = self.hidden;
        let width = hidden / self.heads;
        let scale = 1.0 / (width as f32).sqrt();
        let stride = 3 * hidden;
        for &(start, len) in spans {
            scores.clear();
            scores.resize(len, 0.0);
            keys.clear();
            keys.resize(width * len, 0.0);
            let rows = &qkv[start * stride..(start + len) * stride];
            for head in 0..self.heads {
                let offset = head * width;
                // keys[d][j] = K[j][offset + d], pre-scaled.
                for (j, row) in rows.chunks_exact(stride).enumerate() {
                    let key = &row[hidden + offset..][..width];
                    for (d, &k) in key.iter().enumerate() {
                        keys[d * len + j] = k * scale;
                    }
                }
                for (i, row) in rows.chunks_exact(stride).enumerate() {
                    let query = &row[offset..][..width];
                    scores.fill(0.0);
                    for (&q, column) in query.iter().zip(keys.chunks_exact(len)) {
                        scores.iter_mut().zip(column).for_each(|(s, k)| *s += q * k);
                    }
                    softmax(scores);
                    let out = &mut context[(start + i) * hidden + offset..][..width];
                    out.fill(0.0);
                    for (&weight, value_row) in scores.iter().zip(rows.chunks_exact(stride)) {
                        let value = &value_row[2 * hidden + offset..][..width];
                        out.iter_mut()
                            .zip(value)
                            .for_each(|(c, v)| *c += weight * v);
                    }
                }
            }
        }
    }
}

/// Buffers of one forward pass, kept per thread between passes so a short query does
/// not map and zero fresh pages for its activations every time.
#[derive(Default)]
struct Scratch {
    /// Query, key and value of every token.
    qkv: Vec<f32>,
    /// Attention output before its projection.
    context: Vec<f32>,
    /// The attention block's output.
    attended: Vec<f32>,
    /// The feed-forward layer's wide activations.
    inner: Vec<f32>,
    /// The block's output before it becomes the next block's input.
    out: Vec<f32>,
    /// One query's attention weights.
    scores: Vec<f32>,
    /// One head's keys, transposed.
    keys: Vec<f32>,
}

impl Scratch {
    /// Floats a thread keeps between passes at most (16 MiB); a larger batch's buffers are freed.
    const KEEP: usize = 4 << 20;

    /// Free the buffers if they grew past [`Scratch::KEEP`] floats in all.
    fn shrink_if_large(&mut self) {
        let held = self.qkv.capacity()
            + self.context.capacity()
            + self.attended.capacity()
            + self.inner.capacity()
            + self.out.capacity();
        if held > Self::KEEP {
            *self = Self::default();
        }
    }
}

thread_local! {
    /// This thread's forward-pass buffers.
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

/// `(rows × cols)` row-major → `(cols × rows)` row-major.
fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}

/// Dense layers with the same inputs joined into one, outputs side by side.
fn side_by_side(parts: &[&Dense]) -> Dense {
    let inputs = parts[0].inputs;
    let outputs: usize = parts.iter().map(|part| part.outputs).sum();
    let mut weight = Vec::with_capacity(inputs * outputs);
    for row in 0..inputs {
        for part in parts {
            weight.extend_from_slice(&part.weight[row * part.outputs..][..part.outputs]);
        }
    }
    let bias = parts
        .iter()
        .flat_map(|part| part.bias.iter().copied())
        .collect();
    Dense::new(weight, bias, inputs, outputs)
}

/// The linear layers of a block, named by where their input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Site {
    /// Query, key and value: the block's input.
    Qkv = 0,
    /// The attention's projection: the attention context.
    AttentionOut = 1,
    /// The first feed-forward layer: the attention block's output.
    Intermediate = 2,
    /// The second feed-forward layer: the activated wide layer.
    Output = 3,
}

/// Sees each linear layer's input during a pass: block index, layer, `tokens × inputs`.
type Observer<'a> = dyn FnMut(usize, Site, &[f32]) + 'a;

/// How this pass multiplies by a linear layer's weight.
#[derive(Clone, Copy)]
struct Product {
    /// Threads the general product may use.
    parallelism: Parallelism,
    /// The CPU has AVX2 and FMA: a few rows go through [`small::small_product`].
    avx2: bool,
    /// The layers' 8-bit weights are used, with this VNNI ([`int8::product`]).
    int8: Option<Vnni>,
}

impl Product {
    /// Whether the pass may spread element-wise steps over threads too.
    fn wide(self) -> bool {
        !matches!(self.parallelism, Parallelism::None)
    }

    /// `out = x · W + b` for `rows` rows of `x`.
    #[inline(always)]
    fn linear(self, x: &[f32], rows: usize, dense: &Dense, out: &mut Vec<f32>) {
        assert_eq!(x.len(), rows * dense.inputs, "linear layer input shape");
        out.clear();
        out.reserve(rows * dense.outputs);
        for _ in 0..rows {
            out.extend_from_slice(&dense.bias);
        }
        if rows == 0 {
            return;
        }
        if let (Some(vnni), Some(weight)) = (self.int8, &dense.int8) {
            let threads = match self.parallelism {
                Parallelism::Rayon(threads) => threads,
                _ => 1,
            };
            int8::product(vnni, x, rows, weight, out, threads);
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.avx2 && rows <= small::SMALL_ROWS && !dense.bands.is_empty() {
            // SAFETY: `avx2` is set only where the CPU was found to have AVX2 and FMA.
            unsafe {
                small::small_product(
                    x,
                    rows,
                    &dense.bands,
                    &dense.weight,
                    dense.inputs,
                    dense.outputs,
                    out,
                )
            };
            return;
        }
        // SAFETY: `out` is `rows × outputs`, `x` is `rows × inputs` and the weight is
        // `inputs × outputs`, all row-major, contiguous and non-overlapping, as the
        // strides below describe (column stride 1, row stride the row width).
        unsafe {
            gemm::gemm(
                rows,
                dense.outputs,
                dense.inputs,
                out.as_mut_ptr(),
                1,
                dense.outputs as isize,
                true,
                x.as_ptr(),
                1,
                dense.inputs as isize,
                dense.weight.as_ptr(),
                1,
                dense.outputs as isize,
                1.0,
                1.0,
                false,
                false,
                false,
                self.parallelism,
            );
        }
    }
}

/// `a += b`, element by element.
#[inline(always)]
fn add_assign(a: &mut [f32], b: &[f32]) {
    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
}

/// Normalise each `width`-wide row of `x` to zero mean and unit variance, then scale and shift.
#[inline(always)]
fn layer_norm(x: &mut [f32], width: usize, norm: &Norm, eps: f32, parallel: bool) {
    if parallel && x.len() >= 64 * width {
        x.par_chunks_mut(width)
            .for_each(|row| normalise(row, norm, eps));
    } else {
        for row in x.chunks_exact_mut(width) {
            normalise(row, norm, eps);
        }
    }
}

/// One row of [`layer_norm`].
#[inline(always)]
fn normalise(row: &mut [f32], norm: &Norm, eps: f32) {
    let width = row.len() as f32;
    let mean = lane_sum(row.iter().copied()) / width;
    let variance = lane_sum(row.iter().map(|v| (v - mean) * (v - mean))) / width;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
        *v = (*v - mean) * inverse * g + b;
    }
}

/// A sum in eight interleaved partial sums, which the compiler keeps in one vector
/// register (a plain float sum must add one value after another).
#[inline(always)]
fn lane_sum(values: impl Iterator<Item = f32>) -> f32 {
    let mut lanes = [0.0f32; 8];
    for (index, value) in values.enumerate() {
        lanes[index % 8] += value;
    }
    lanes.iter().sum()
}

/// Apply the feed-forward activation in place.
#[inline(always)]
fn activate(x: &mut [f32], activation: Activation, parallel: bool) {
    if parallel && x.len() >= 1 << 16 {
        x.par_chunks_mut(1 << 14)
            .for_each(|chunk| activate_serially(chunk, activation));
    } else {
        activate_serially(x, activation);
    }
}

/// [`activate`] on the current thread.
#[inline(always)]
fn activate_serially(x: &mut [f32], activation: Activation) {
    match activation {
        Activation::GeluErf => {
            for v in x.iter_mut() {
                *v = gelu_erf(*v);
            }
        }
        Activation::GeluTanh => {
            for v in x.iter_mut() {
                *v = gelu_tanh(*v);
            }
        }
        Activation::Relu => {
            for v in x.iter_mut() {
                *v = v.max(0.0);
            }
        }
    }
}

/// Softmax of `scores` in place.
#[inline(always)]
fn softmax(scores: &mut [f32]) {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut total = 0.0;
    for score in scores.iter_mut() {
        *score = exp(*score - max);
        total += *score;
    }
    let inverse = 1.0 / total;
    scores.iter_mut().for_each(|score| *score *= inverse);
}

/// `e^x` for float32 without a library call, so loops over it vectorise: `x = k·ln2 + r`
/// with `k` an integer (its power of two built in the exponent bits) and `|r| ≤ ln2/2`
/// (ln 2 split in two so `r` is exact), `e^r` a degree-7 Taylor polynomial
/// (relative error below 3e-7 over the float range).
#[inline(always)]
fn exp(x: f32) -> f32 {
    /// ln 2's leading bits: `k · LN2_HIGH` is exact for every `|k| ≤ 128`.
    const LN2_HIGH: f32 = 0.693_359_4;
    /// The rest of ln 2.
    const LN2_LOW: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by adding and removing 1.5 · 2^23 (no library call).
    const ROUND: f32 = 12_582_912.0;
    let whole = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = (x - whole * LN2_HIGH) - whole * LN2_LOW;
    let mut term = 1.0f32 / 5040.0;
    term = term * r + 1.0 / 720.0;
    term = term * r + 1.0 / 120.0;
    term = term * r + 1.0 / 24.0;
    term = term * r + 1.0 / 6.0;
    term = term * r + 0.5;
    term = term * r + 1.0;
    term = term * r + 1.0;
    let power = f32::from_bits(((whole as i32 + 127) as u32) << 23);
    term * power
}

/// The error function, Abramowitz and Stegun 7.1.26 (absolute error < 1.5e-7).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// GELU with the exact normal CDF: `x · ½ (1 + erf(x / √2))`.
#[inline(always)]
fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation: `½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    let inner = 0.797_884_6 * (x + 0.044_715 * x * x * x);
    // tanh(u) = 1 - 2 / (e^{2u} + 1)
    let tanh = 1.0 - 2.0 / (exp(2.0 * inner) + 1.0);
    0.5 * x * (1.0 + tanh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_the_standard_library() {
        let mut worst = 0.0f32;
        let mut x = -30.0f32;
        while x < 30.0 {
            let relative = ((exp(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(relative);
            x += 0.0137;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert!(exp(-200.0) < 1e-37);
        assert!(exp(200.0).is_finite());
    }

    #[test]
    fn erf_and_gelu_match_their_definitions() {
        // erf reference values (to 1e-9) from the series definition.
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916),
            (0.5, 0.520_499_878),
            (1.0, 0.842_700_793),
            (2.0, 0.995_322_265),
            (3.0, 0.999_977_910),
        ] {
            assert!((erf(x) as f64 - want).abs() < 4e-7, "erf({x}) = {}", erf(x));
            assert!((erf(-x) as f64 + want).abs() < 4e-7, "erf(-{x})");
        }
        assert!((gelu_erf(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((gelu_erf(-1.0) + 0.158_655_3).abs() < 1e-6);
        assert_eq!(gelu_erf(-20.0), 0.0);
        assert!((gelu_tanh(1.0) - 0.841_192).abs() < 1e-5);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut scores = [1.0f32, 3.0, -2.0, 3.0];
        softmax(&mut scores);
        assert!((scores.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(scores[1] > scores[0] && scores[0] > scores[2]);
        assert_eq!(scores[1], scores[3]);
    }

    /// A tiny random BERT whose forward pass is checked against a naive, padded,
    /// masked implementation written straight from the definition.
    #[test]
    fn packed_forward_equals_a_padded_masked_reference() {
        let config = BertConfig {
            vocab_size: 11,
            hidden_size: 8,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            intermediate_size: 12,
            hidden_act: "gelu".into(),
            max_position_embeddings: 9,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            model_type: Some("bert".into()),
            position_embedding_type: None,
        };
        let mut next = uniform(7);
        let mut weights = HashMap::new();
        let mut put = |name: String, shape: Vec<usize>| {
            let values = (0..shape.iter().product::<usize>())
                .map(|_| next())
                .collect();
            weights.insert(name, Weight { shape, values });
        };
        put("embeddings.word_embeddings.weight".into(), vec![11, 8]);
        put("embeddings.position_embeddings.weight".into(), vec![9, 8]);
        put("embeddings.token_type_embeddings.weight".into(), vec![2, 8]);
        put("embeddings.LayerNorm.weight".into(), vec![8]);
        put("embeddings.LayerNorm.bias".into(), vec![8]);
        for layer in 0..2 {
            let base = format!("encoder.layer.{layer}");
            for (name, outputs, inputs) in [
                ("attention.self.query", 8, 8),
                ("attention.self.key", 8, 8),
                ("attention.self.value", 8, 8),
                ("attention.output.dense", 8, 8),
                ("intermediate.dense", 12, 8),
                ("output.dense", 8, 12),
            ] {
                put(format!("{base}.{name}.weight"), vec![outputs, inputs]);
                put(format!("{base}.{name}.bias"), vec![outputs]);
            }
            for name in ["attention.output", "output"] {
                put(format!("{base}.{name}.LayerNorm.weight"), vec![8]);
                put(format!("{base}.{name}.LayerNorm.bias"), vec![8]);
            }
        }
        // A checkpoint that does not fit its config is refused, naming the tensor.
        let mut missing = clone_weights(&weights);
        missing.remove("encoder.layer.1.output.dense.bias");
        let error = BertEncoder::load(&config, missing).err().unwrap();
        assert!(
            error.contains("no tensor encoder.layer.1.output.dense.bias"),
            "{error}"
        );
        let mut narrow = clone_weights(&weights);
        narrow
            .get_mut("encoder.layer.0.intermediate.dense.weight")
            .unwrap()
            .shape = vec![8, 12];
        let error = BertEncoder::load(&config, narrow).err().unwrap();
        assert!(
            error.contains("has shape [8, 12], config.json implies [12, 8]"),
            "{error}"
        );
        let odd = BertConfig {
            hidden_act: "swish".into(),
            ..config.clone()
        };
        let error = BertEncoder::load(&odd, clone_weights(&weights))
            .err()
            .unwrap();
        assert!(error.contains("hidden_act `swish`"), "{error}");
        let split = BertConfig {
            num_attention_heads: 3,
            ..config.clone()
        };
        let error = BertEncoder::load(&split, clone_weights(&weights))
            .err()
            .unwrap();
        assert!(error.contains("not a multiple"), "{error}");

        let reference = Reference::new(&weights);
        let encoder = BertEncoder::load(&config, clone_weights(&weights)).unwrap();

        let ids: [&[u32]; 3] = [&[1, 5, 9, 2], &[1, 3, 2], &[1, 4, 4, 7, 10, 6, 2]];
        let types: [&[u32]; 3] = [&[0, 0, 0, 0], &[0, 1, 1], &[0, 0, 0, 1, 1, 1, 1]];
        let sequences: Vec<Sequence> = ids
            .iter()
            .zip(types)
            .map(|(ids, type_ids)| Sequence { ids, type_ids })
            .collect();
        let packed = encoder.forward(&sequences, false).unwrap();
        let want = reference.forward_padded(&ids, &types);
        assert_eq!(packed.len(), want.len());
        // The portable build of the blocks (what CPUs without AVX2 run) agrees too.
        let (mut portable, spans) = encoder.embed_tokens(&sequences).unwrap();
        encoder.layers(
            &mut portable,
            &spans,
            Product {
                parallelism: Parallelism::None,
                avx2: false,
                int8: None,
            },
            None,
        );
        let apart = max_difference(&portable, &packed);
        assert!(
            apart < 1e-5,
            "portable and dispatched passes differ by {apart}"
        );
        let worst = max_difference(&packed, &want);
        assert!(
            worst < 1e-5,
            "packed differs from the padded reference by {worst}"
        );

        // Each sequence alone gives the same rows as in the batch.
        let alone = encoder.forward(&sequences[2..], false).unwrap();
        let worst = max_difference(&alone, &packed[7 * 8..]);
        assert!(worst < 1e-6, "alone differs from batched by {worst}");

        let too_long: Vec<u32> = vec![1; 10];
        let error = encoder
            .forward(
                &[Sequence {
                    ids: &too_long,
                    type_ids: &too_long,
                }],
                false,
            )
            .unwrap_err();
        assert!(error.contains("at most 9"), "{error}");
        let error = encoder
            .forward(
                &[Sequence {
                    ids: &[11],
                    type_ids: &[0],
                }],
                false,
            )
            .unwrap_err();
        assert!(error.contains("outside"), "{error}");
        assert!(encoder.forward(&[], false).unwrap().is_empty());

        // Quantized (where the CPU has VNNI): sequences under INT8_MIN_TOKENS keep their
        // float32 rows, longer ones take the 8-bit layers, a mixed batch keeps its order.
        let mut int8 = BertEncoder::load(&config, weights).unwrap();
        if !int8.quantize_int8(&sequences).unwrap() {
            println!("SKIPPED the quantized half of packed_forward_equals_a_padded_masked_reference: this CPU has no VNNI");
            return;
        }
        assert!(int8.is_int8() && int8.int8_bytes() > 0);
        let long: &[u32] = &[1, 4, 4, 7, 10, 6, 3, 2];
        assert_eq!(long.len(), INT8_MIN_TOKENS);
        let mixed = [
            sequences[0],
            Sequence {
                ids: long,
                type_ids: &[0; 8],
            },
            sequences[1],
        ];
        let (rows, floats) = (
            int8.forward(&mixed, false).unwrap(),
            encoder.forward(&mixed, false).unwrap(),
        );
        let (short_a, long_rows, short_b) = (..4 * 8, 4 * 8..12 * 8, 12 * 8..);
        assert_eq!(rows.len(), floats.len());
        assert!(max_difference(&rows[short_a], &floats[short_a]) < 1e-6);
        assert!(max_difference(&rows[short_b.clone()], &floats[short_b]) < 1e-6);
        let alone = int8.forward(&mixed[1..2], false).unwrap();
        assert_eq!(&rows[long_rows.clone()], &alone[..]);
        let apart = max_difference(&rows[long_rows.clone()], &floats[long_rows]);
        assert!(
            apart > 0.0 && apart < 0.2,
            "8-bit rows {apart} from float32's"
        );
    }

    /// The definition of BERT's forward pass written plainly (f64, padding and an
    /// additive mask as Hugging Face does), to check the packed implementation.
    struct Reference {
        /// Every tensor as f64, by name.
        tensors: HashMap<String, (Vec<usize>, Vec<f64>)>,
    }

    impl Reference {
        fn new(weights: &HashMap<String, Weight>) -> Self {
            let tensors = weights
                .iter()
                .map(|(name, w)| {
                    (
                        name.clone(),
                        (
                            w.shape.clone(),
                            w.values.iter().map(|&v| v as f64).collect(),
                        ),
                    )
                })
                .collect();
            Self { tensors }
        }

        fn t(&self, name: &str) -> &[f64] {
            &self.tensors[name].1
        }

        fn dense(&self, name: &str, x: &[f64]) -> Vec<f64> {
            let (shape, w) = &self.tensors[&format!("{name}.weight")];
            let (outputs, inputs) = (shape[0], shape[1]);
            let b = self.t(&format!("{name}.bias"));
            (0..outputs)
                .map(|o| b[o] + (0..inputs).map(|i| w[o * inputs + i] * x[i]).sum::<f64>())
                .collect()
        }

        fn norm(&self, name: &str, x: &[f64]) -> Vec<f64> {
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            let (g, b) = (
                self.t(&format!("{name}.weight")),
                self.t(&format!("{name}.bias")),
            );
            x.iter()
                .enumerate()
                .map(|(i, v)| (v - mean) / (var + 1e-12).sqrt() * g[i] + b[i])
                .collect()
        }

        fn forward_padded(&self, ids: &[&[u32]], types: &[&[u32]]) -> Vec<f32> {
            let h = 8;
            let longest = ids.iter().map(|s| s.len()).max().unwrap();
            let mut out = Vec::new();
            for (seq, seg) in ids.iter().zip(types) {
                // Pad with id 0, type 0 and mask the padding out.
                let mask: Vec<f64> = (0..longest)
                    .map(|p| if p < seq.len() { 0.0 } else { f64::MIN / 2.0 })
                    .collect();
                let mut x: Vec<Vec<f64>> = (0..longest)
                    .map(|p| {
                        let (id, ty) = if p < seq.len() {
                            (seq[p] as usize, seg[p] as usize)
                        } else {
                            (0, 0)
                        };
                        let e: Vec<f64> = (0..h)
                            .map(|i| {
                                self.t("embeddings.word_embeddings.weight")[id * h + i]
                                    + self.t("embeddings.position_embeddings.weight")[p * h + i]
                                    + self.t("embeddings.token_type_embeddings.weight")[ty * h + i]
                            })
                            .collect();
                        self.norm("embeddings.LayerNorm", &e)
                    })
                    .collect();
                for layer in 0..2 {
                    let base = format!("encoder.layer.{layer}");
                    let q: Vec<_> = x
                        .iter()
                        .map(|r| self.dense(&format!("{base}.attention.self.query"), r))
                        .collect();
                    let k: Vec<_> = x
                        .iter()
                        .map(|r| self.dense(&format!("{base}.attention.self.key"), r))
                        .collect();
                    let v: Vec<_> = x
                        .iter()
                        .map(|r| self.dense(&format!("{base}.attention.self.value"), r))
                        .collect();
                    let mut ctx = vec![vec![0.0; h]; longest];
                    for head in 0..2 {
                        let range = head * 4..head * 4 + 4;
                        for i in 0..longest {
                            let scores: Vec<f64> = (0..longest)
                                .map(|j| {
                                    range.clone().map(|d| q[i][d] * k[j][d]).sum::<f64>() / 2.0
                                        + mask[j]
                                })
                                .collect();
                            let max = scores.iter().copied().fold(f64::MIN, f64::max);
                            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                            let total: f64 = e.iter().sum();
                            for d in range.clone() {
                                ctx[i][d] = (0..longest).map(|j| e[j] / total * v[j][d]).sum();
                            }
                        }
                    }
                    let attended: Vec<Vec<f64>> = (0..longest)
                        .map(|i| {
                            let a = self.dense(&format!("{base}.attention.output.dense"), &ctx[i]);
                            let sum: Vec<f64> = a.iter().zip(&x[i]).map(|(a, b)| a + b).collect();
                            self.norm(&format!("{base}.attention.output.LayerNorm"), &sum)
                        })
                        .collect();
                    x = attended
                        .iter()
                        .map(|a| {
                            let inner: Vec<f64> = self
                                .dense(&format!("{base}.intermediate.dense"), a)
                                .into_iter()
                                .map(|u| 0.5 * u * (1.0 + series_erf(u / std::f64::consts::SQRT_2)))
                                .collect();
                            let o = self.dense(&format!("{base}.output.dense"), &inner);
                            let sum: Vec<f64> = o.iter().zip(a).map(|(o, a)| o + a).collect();
                            self.norm(&format!("{base}.output.LayerNorm"), &sum)
                        })
                        .collect();
                }
                for row in x.iter().take(seq.len()) {
                    out.extend(row.iter().map(|&v| v as f32));
                }
            }
            out
        }
    }

    /// Deterministic pseudo-random floats in [-0.5, 0.5) from `seed` (a 64-bit LCG), for
    /// the tests' random weights and inputs.
    pub(crate) fn uniform(mut seed: u64) -> impl FnMut() -> f32 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        }
    }

    /// The largest absolute difference between two equally long slices.
    fn max_difference(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max)
    }

    /// A copy of a checkpoint's tensors.
    fn clone_weights(weights: &HashMap<String, Weight>) -> HashMap<String, Weight> {
        weights
            .iter()
            .map(|(name, w)| {
                (
                    name.clone(),
                    Weight {
                        shape: w.shape.clone(),
                        values: w.values.clone(),
                    },
                )
            })
            .collect()
    }

    /// erf in f64 by its Maclaurin series (|x| is small in the tiny model).
    fn series_erf(x: f64) -> f64 {
        if x.abs() > 5.0 {
            return x.signum();
        }
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }
}

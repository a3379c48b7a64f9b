//! The `Embedder` trait and the built-in offline embedder.
//!
//! Embedding is CPU work and synchronous; actors run it on a blocking task when a
//! model is heavy. Every vector an embedder returns is L2-normalised, so cosine
//! similarity is a dot product everywhere in the runtime.

use crate::error::MemoryResult;

/// Turns text into fixed-size, L2-normalised vectors.
pub trait Embedder: Send + Sync + 'static {
    /// Stable identifier of the model; stores refuse vectors of another model.
    fn model_id(&self) -> &str;
    /// Length of every vector this embedder returns.
    fn dimension(&self) -> usize;
    /// Embed a batch of texts, one vector per text, in order.
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>>;
    /// True when splitting a large batch across threads speeds it up (a model that
    /// already uses every core for one batch says false).
    fn parallel_batches(&self) -> bool {
        false
    }
    /// True when one call with many texts costs much less than many calls with one (a
    /// transformer on the CPU, a remote API): concurrent small requests are then
    /// collected for a moment and embedded together (`embedding.micro_batch_ms`).
    fn batching_pays(&self) -> bool {
        false
    }
    /// Embed questions to search with: models trained with a query prompt
    /// ("query: ") get it here; by default the same as [`Embedder::embed_batch`].
    fn embed_queries(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        self.embed_batch(texts)
    }
    /// Embed one text.
    fn embed(&self, text: &str) -> MemoryResult<Vec<f32>> {
        let mut vectors = self.embed_batch(&[text])?;
        vectors
            .pop()
            .ok_or_else(|| crate::error::MemoryError::internal("embedder returned no vector"))
    }
}

/// Scale a vector to unit length in place (leaves a zero vector alone).
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product of two equally long vectors (cosine for unit vectors).
///
/// This is the inner loop of every exact vector search and near-duplicate check
/// ([`lane_dot`] keeps it vectorised).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    lane_dot(a, b, |y| y)
}

/// Σ a[i] · widen(b[i]) over the common length, for `b` of any element type (floats,
/// the flat index's int8 codes).
///
/// Eight independent accumulators let the compiler vectorise the loop (a single
/// running sum must be added in order and stays scalar).
#[inline(always)]
pub fn lane_dot<T: Copy>(a: &[f32], b: &[T], widen: impl Fn(T) -> f32) -> f32 {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut lanes = [0.0f32; 8];
    let a_chunks = a.chunks_exact(8);
    let b_chunks = b.chunks_exact(8);
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * widen(*y))
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * widen(y[lane]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Offline embedder that needs no weights: signed feature hashing of lower-cased
/// word unigrams, word bigrams and character trigrams, followed by L2 normalisation.
///
/// It captures lexical overlap (including morphology through trigrams), not meaning;
/// it exists so that the runtime works with no model at all and is fast enough for
/// the 100k-memory benchmark.
#[derive(Debug, Clone)]
pub struct BuiltinEmbedder {
    /// Output dimension (number of hash buckets).
    dimension: usize,
    /// `builtin-hash-v1-<dimension>`, recorded by stores.
    model_id: String,
}

impl BuiltinEmbedder {
    /// An embedder with `dimension` hash buckets.
    pub fn new(dimension: usize) -> Self {
        Self {
            dimension: dimension.max(8),
            model_id: format!("builtin-hash-v1-{}", dimension.max(8)),
        }
    }

    fn add_feature(&self, vector: &mut [f32], hash: u64, weight: f32) {
        let bucket = (hash % self.dimension as u64) as usize;
        let sign = if (hash >> 63) & 1 == 0 { 1.0 } else { -1.0 };
        vector[bucket] += sign * weight;
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimension];
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        // Reused per word: the characters of "^word$" (no allocation per feature).
        let mut padded: Vec<char> = Vec::with_capacity(32);
        for (index, word) in words.iter().enumerate() {
            let weight = if crate::text::is_stopword(word) {
                0.2
            } else {
                1.0
            };
            self.add_feature(&mut vector, fnv1a(FNV_OFFSET, word.as_bytes()), weight);
            if let Some(next) = words.get(index + 1) {
                let hash = fnv1a(
                    fnv1a(fnv1a(FNV_OFFSET, word.as_bytes()), b" "),
                    next.as_bytes(),
                );
                self.add_feature(&mut vector, hash, 0.5 * weight);
            }
            padded.clear();
            padded.push('^');
            padded.extend(word.chars());
            padded.push('$');
            if padded.len() > 4 {
                for window in padded.windows(3) {
                    let mut hash = FNV_OFFSET;
                    for c in window {
                        let mut buffer = [0u8; 4];
                        hash = fnv1a(hash, c.encode_utf8(&mut buffer).as_bytes());
                    }
                    self.add_feature(&mut vector, hash, 0.25 * weight);
                }
            }
        }
        l2_normalize(&mut vector);
        vector
    }
}

impl Embedder for BuiltinEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn dimension(&self) -> usize {
        self.dimension
    }
    fn embed_batch(&self, texts: &[&str]) -> MemoryResult<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }
    fn parallel_batches(&self) -> bool {
        true
    }
}

/// FNV-1a offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a continued from `hash` over `bytes`; stable across platforms and
/// releases (unlike `DefaultHasher`), and chainable so features hash without allocating.
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_vectors_are_unit_length_and_deterministic() {
        let embedder = BuiltinEmbedder::new(256);
        let a = embedder.embed("The cat sits on the mat").unwrap();
        let b = embedder.embed("The cat sits on the mat").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 256);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn builtin_similarity_follows_word_overlap() {
        let embedder = BuiltinEmbedder::new(256);
        let cat = embedder.embed("the cat sits on the mat").unwrap();
        let cats = embedder.embed("cats sitting on a mat").unwrap();
        let revenue = embedder
            .embed("quarterly revenue grew by ten percent")
            .unwrap();
        assert!(dot(&cat, &cats) > dot(&cat, &revenue) + 0.2);
    }

    #[test]
    fn dot_matches_the_plain_sum_for_every_length() {
        for len in [0, 1, 7, 8, 9, 255, 256, 384] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "len {len}");
        }
    }

    #[test]
    fn empty_text_gives_zero_vector() {
        let embedder = BuiltinEmbedder::new(64);
        let v = embedder.embed("   ").unwrap();
        assert!(v.iter().all(|x| *x == 0.0));
    }
}

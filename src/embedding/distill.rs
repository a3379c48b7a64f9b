//! `mnemos embedder distill`: turn a sentence-transformers BERT model into a static
//! embedding table (`static_table.rs`).
//!
//! For every token of the model's vocabulary, the model reads `[CLS] token [SEP]` and
//! the last hidden state at the token's position is its contextual output embedding;
//! the vectors are centred and reduced by PCA to `dimension` components, each token's
//! vector is weighted by how rare the token is (a smooth-inverse-frequency weight
//! from its rank in the vocabulary, which BERT orders by frequency), and the table is
//! quantised to one byte per component with a scale per token. Special and unused
//! tokens get no vector. The same model and options give the same table (the
//! committed table is checked against a fresh distillation in the tests).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use mnemos_actors::error::{MemoryError, MemoryResult};

use super::local::LocalEmbedder;
use super::static_table::{vocabulary_of, StaticTable};

/// How a token's three output positions become its vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPooling {
    /// Mean of `[CLS]`, the token and `[SEP]` (what the teacher does for a one-word
    /// text); on the LoCoMo dev file 0.752 any@10 against 0.786 for `Own`.
    Mean,
    /// The token's own position only (the default).
    Own,
}

/// What `distill` makes.
#[derive(Debug, Clone)]
pub struct DistillOptions {
    /// Components kept by PCA (at most the model's hidden size).
    pub dimension: usize,
    /// Smooth-inverse-frequency coefficient `a` of the weight `a / (a + p(token))`; 0 leaves vectors unweighted.
    pub sif: f64,
    /// How the output positions are combined.
    pub pooling: TokenPooling,
    /// Most pieces of one text that count (the teacher reads 256 tokens with its specials).
    pub max_pieces: usize,
    /// Each component is divided by its standard deviation to this power (0: plain PCA, 1: whitened).
    pub whiten: f64,
}

impl Default for DistillOptions {
    fn default() -> Self {
        Self {
            dimension: 256,
            sif: 1e-5,
            pooling: TokenPooling::Own,
            max_pieces: 254,
            whiten: 0.0,
        }
    }
}

/// Tokens without meaning of their own: padding, specials, and BERT's unused slots.
fn is_meaningless(token: &str) -> bool {
    (token.starts_with('[') && token.ends_with(']') && token.len() > 2) || token.is_empty()
}

/// Distil the model in `dir` into a table; `progress(done, total)` is called as tokens are embedded.
pub fn distill(
    dir: &Path,
    options: &DistillOptions,
    progress: &dyn Fn(usize, usize),
) -> MemoryResult<StaticTable> {
    let failed = |e: String| MemoryError::internal(format!("distillation failed: {e}"));
    let vocabulary = vocabulary_of(dir)?;
    let model = LocalEmbedder::load(dir)?;
    let hidden = mnemos_actors::embedding::Embedder::dimension(&model);
    if options.dimension == 0 || options.dimension > hidden {
        return Err(MemoryError::invalid(
            "dimension",
            format!("must be between 1 and the model's hidden size {hidden}"),
        ));
    }
    let special = |name: &str| {
        vocabulary.id(name).ok_or_else(|| {
            MemoryError::invalid(
                "embedding.model_dir",
                format!("the vocabulary has no {name} token"),
            )
        })
    };
    let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
    let kept: Vec<u32> = (0..vocabulary.tokens.len() as u32)
        .filter(|&id| !is_meaningless(&vocabulary.tokens[id as usize]))
        .collect();

    let mut rows: Vec<f64> = Vec::with_capacity(kept.len() * hidden);
    for (index, chunk) in kept.chunks(1024).enumerate() {
        let outputs = model
            .token_outputs(chunk, cls, sep)
            .map_err(|e| failed(e.to_string()))?;
        for (mean, own) in outputs {
            let vector = match options.pooling {
                TokenPooling::Mean => mean,
                TokenPooling::Own => own,
            };
            rows.extend(vector.iter().map(|&x| f64::from(x)));
        }
        progress((index * 1024 + chunk.len()).min(kept.len()), kept.len());
    }

    let reduced =
        pca(&rows, kept.len(), hidden, options.dimension, options.whiten).map_err(failed)?;

    // Smooth inverse frequency from the vocabulary rank: p(rank) ∝ 1 / (rank + 2).
    let total: f64 = (0..vocabulary.tokens.len())
        .map(|rank| 1.0 / (rank as f64 + 2.0))
        .sum();
    let mut vectors = vec![vec![0.0f32; options.dimension]; vocabulary.tokens.len()];
    for (row, &id) in kept.iter().enumerate() {
        let p = 1.0 / (f64::from(id) + 2.0) / total;
        let weight = if options.sif > 0.0 {
            options.sif / (options.sif + p)
        } else {
            1.0
        };
        let source = &reduced[row * options.dimension..(row + 1) * options.dimension];
        vectors[id as usize] = source.iter().map(|&x| (x * weight) as f32).collect();
    }
    let description = format!(
        "{}; tokens {} of {}; pooling {:?}; pca {}; sif {}",
        model_name(dir),
        kept.len(),
        vocabulary.tokens.len(),
        options.pooling,
        options.dimension,
        options.sif
    );
    Ok(StaticTable::quantize(
        &vocabulary,
        options.max_pieces,
        description,
        &vectors,
    ))
}

/// A short name of the model in `dir`: its directory name, and its model id.
fn model_name(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match LocalEmbedder::load(dir) {
        Ok(model) => format!(
            "{name} ({})",
            mnemos_actors::embedding::Embedder::model_id(&model)
        ),
        Err(_) => name,
    }
}

/// Centre the `n × width` rows and project them on their `k` principal components
/// (sign fixed so each component's largest loading is positive); `n × k` row-major.
fn pca(rows: &[f64], n: usize, width: usize, k: usize, whiten: f64) -> Result<Vec<f64>, String> {
    let as_text = |e: candle_core::Error| e.to_string();
    let device = Device::Cpu;
    let x = Tensor::from_slice(rows, (n, width), &device).map_err(as_text)?;
    let mean = x.mean_keepdim(0).map_err(as_text)?;
    let centred = x.broadcast_sub(&mean).map_err(as_text)?;
    let covariance = (centred
        .t()
        .map_err(as_text)?
        .matmul(&centred)
        .map_err(as_text)?
        / n as f64)
        .map_err(as_text)?;
    let covariance: Vec<f64> = covariance
        .flatten_all()
        .and_then(|t| t.to_vec1::<f64>())
        .map_err(as_text)?;
    let (values, vectors) = symmetric_eigen(&covariance, width);
    // Columns of `vectors` by decreasing eigenvalue, the first k.
    let mut order: Vec<usize> = (0..width).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let mut basis = vec![0.0f64; width * k];
    for (column, &source) in order.iter().take(k).enumerate() {
        let loading = |row: usize| vectors[row * width + source];
        let largest = (0..width)
            .max_by(|&a, &b| loading(a).abs().total_cmp(&loading(b).abs()))
            .unwrap_or(0);
        let sign = if loading(largest) < 0.0 { -1.0 } else { 1.0 };
        let sign = sign / values[source].max(1e-12).sqrt().powf(whiten);
        for row in 0..width {
            basis[row * k + column] = sign * loading(row);
        }
    }
    let basis = Tensor::from_vec(basis, (width, k), &device).map_err(as_text)?;
    centred
        .matmul(&basis)
        .and_then(|t| t.to_dtype(DType::F64))
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f64>())
        .map_err(as_text)
}

/// Eigenvalues and eigenvectors (columns of the row-major `n × n` result) of the
/// symmetric row-major matrix `a`: Householder reduction to tridiagonal form, then
/// the implicit QL method with shifts.
pub fn symmetric_eigen(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = a.to_vec();
    let mut d = vec![0.0f64; n];
    let mut e = vec![0.0f64; n];
    if n == 0 {
        return (d, v);
    }
    tridiagonalize(&mut v, &mut d, &mut e, n);
    diagonalize(&mut v, &mut d, &mut e, n);
    (d, v)
}

/// Householder reduction of `v` (symmetric, row-major) to tridiagonal form: diagonal
/// in `d`, sub-diagonal in `e`, the accumulated orthogonal transform left in `v`.
fn tridiagonalize(v: &mut [f64], d: &mut [f64], e: &mut [f64], n: usize) {
    let at = |row: usize, col: usize| row * n + col;
    for j in 0..n {
        d[j] = v[at(n - 1, j)];
    }
    for i in (1..n).rev() {
        let scale: f64 = d[..i].iter().map(|x| x.abs()).sum();
        let mut h = 0.0;
        if scale == 0.0 {
            e[i] = d[i - 1];
            for j in 0..i {
                d[j] = v[at(i - 1, j)];
                v[at(i, j)] = 0.0;
                v[at(j, i)] = 0.0;
            }
        } else {
            for x in d[..i].iter_mut() {
                *x /= scale;
                h += *x * *x;
            }
            let f = d[i - 1];
            let g = if f > 0.0 { -h.sqrt() } else { h.sqrt() };
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            e[..i].iter_mut().for_each(|x| *x = 0.0);
            for j in 0..i {
                let f = d[j];
                v[at(j, i)] = f;
                let mut g = e[j] + v[at(j, j)] * f;
                for k in j + 1..i {
                    g += v[at(k, j)] * d[k];
                    e[k] += v[at(k, j)] * f;
                }
                e[j] = g;
            }
            let mut f = 0.0;
            for j in 0..i {
                e[j] /= h;
                f += e[j] * d[j];
            }
            let hh = f / (h + h);
            for j in 0..i {
                e[j] -= hh * d[j];
            }
            for j in 0..i {
                let (f, g) = (d[j], e[j]);
                for k in j..i {
                    v[at(k, j)] -= f * e[k] + g * d[k];
                }
                d[j] = v[at(i - 1, j)];
                v[at(i, j)] = 0.0;
            }
        }
        d[i] = h;
    }
    for i in 0..n - 1 {
        v[at(n - 1, i)] = v[at(i, i)];
        v[at(i, i)] = 1.0;
        let h = d[i + 1];
        if h != 0.0 {
            for k in 0..=i {
                d[k] = v[at(k, i + 1)] / h;
            }
            for j in 0..=i {
                let g: f64 = (0..=i).map(|k| v[at(k, i + 1)] * v[at(k, j)]).sum();
                for k in 0..=i {
                    v[at(k, j)] -= g * d[k];
                }
            }
        }
        for k in 0..=i {
            v[at(k, i + 1)] = 0.0;
        }
    }
    for j in 0..n {
        d[j] = v[at(n - 1, j)];
        v[at(n - 1, j)] = 0.0;
    }
    v[at(n - 1, n - 1)] = 1.0;
    e[0] = 0.0;
}

/// The implicit QL method on the tridiagonal (`d`, `e`), rotating the columns of `v`.
fn diagonalize(v: &mut [f64], d: &mut [f64], e: &mut [f64], n: usize) {
    let at = |row: usize, col: usize| row * n + col;
    for i in 1..n {
        e[i - 1] = e[i];
    }
    e[n - 1] = 0.0;
    let mut shift = 0.0;
    let mut largest = 0.0f64;
    let eps = f64::EPSILON;
    for l in 0..n {
        largest = largest.max(d[l].abs() + e[l].abs());
        let mut m = l;
        while m < n - 1 && e[m].abs() > eps * largest {
            m += 1;
        }
        if m > l {
            for _ in 0..64 {
                let g = d[l];
                let mut p = (d[l + 1] - g) / (2.0 * e[l]);
                let mut r = p.hypot(1.0);
                if p < 0.0 {
                    r = -r;
                }
                d[l] = e[l] / (p + r);
                d[l + 1] = e[l] * (p + r);
                let next = d[l + 1];
                let h = g - d[l];
                for x in d[l + 2..n].iter_mut() {
                    *x -= h;
                }
                shift += h;
                p = d[m];
                let (mut c, mut c2, mut c3) = (1.0f64, 1.0f64, 1.0f64);
                let next_e = e[l + 1];
                let (mut s, mut s2) = (0.0f64, 0.0f64);
                for i in (l..m).rev() {
                    c3 = c2;
                    c2 = c;
                    s2 = s;
                    let g = c * e[i];
                    let h = c * p;
                    r = p.hypot(e[i]);
                    e[i + 1] = s * r;
                    s = e[i] / r;
                    c = p / r;
                    p = c * d[i] - s * g;
                    d[i + 1] = h + s * (c * g + s * d[i]);
                    for k in 0..n {
                        let h = v[at(k, i + 1)];
                        v[at(k, i + 1)] = s * v[at(k, i)] + c * h;
                        v[at(k, i)] = c * v[at(k, i)] - s * h;
                    }
                }
                p = -s * s2 * c3 * next_e * e[l] / next;
                e[l] = s * p;
                d[l] = c * p;
                if e[l].abs() <= eps * largest {
                    break;
                }
            }
        }
        d[l] += shift;
        e[l] = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigenvectors_satisfy_av_equals_lambda_v() {
        let n = 24;
        // A deterministic symmetric matrix with a spread of eigenvalues.
        let mut a = vec![0.0f64; n * n];
        for i in 0..n {
            for j in 0..=i {
                let x = ((i * 31 + j * 17) % 13) as f64 / 7.0 - 0.9
                    + if i == j { i as f64 } else { 0.0 };
                a[i * n + j] = x;
                a[j * n + i] = x;
            }
        }
        let (values, vectors) = symmetric_eigen(&a, n);
        for col in 0..n {
            let mut norm = 0.0;
            for row in 0..n {
                let av: f64 = (0..n).map(|k| a[row * n + k] * vectors[k * n + col]).sum();
                assert!((av - values[col] * vectors[row * n + col]).abs() < 1e-9);
                norm += vectors[row * n + col] * vectors[row * n + col];
            }
            assert!((norm - 1.0).abs() < 1e-9);
        }
        // Orthogonal columns.
        let dot: f64 = (0..n).map(|k| vectors[k * n] * vectors[k * n + 1]).sum();
        assert!(dot.abs() < 1e-9);
    }

    #[test]
    fn pca_keeps_the_direction_of_largest_variance() {
        // Points along (1, 1) with a little noise across it.
        let mut rows = Vec::new();
        for i in 0..100 {
            let t = i as f64 / 10.0 - 5.0;
            let noise = if i % 2 == 0 { 0.05 } else { -0.05 };
            rows.extend([t + noise, t - noise]);
        }
        let reduced = pca(&rows, 100, 2, 1, 0.0).unwrap();
        let spread = reduced.iter().map(|x| x * x).sum::<f64>() / 100.0;
        // Variance along (1,1)/√2 of t ∈ [-5, 5): ≈ 2 · 8.33.
        assert!((spread - 16.66).abs() < 0.2, "{spread}");
    }

    #[test]
    fn the_committed_table_is_what_distill_reproduces() {
        let Some(dir) = crate::embedding::test_model_dir() else {
            return;
        };
        let fresh = distill(&dir, &DistillOptions::default(), &|_, _| {}).unwrap();
        let committed =
            StaticTable::from_bytes(super::super::static_table::MINILM_TABLE, "committed").unwrap();
        assert_eq!(fresh.dimension, committed.dimension);
        assert_eq!(fresh.tokens, committed.tokens);
        assert_eq!(fresh.unk, committed.unk);
        assert_eq!(fresh.max_pieces, committed.max_pieces);
        let dimension = fresh.dimension;
        let mut worst_cosine = 1.0f64;
        for id in 0..fresh.tokens.len() {
            let (a, b) = (fresh.scales[id], committed.scales[id]);
            assert!(
                (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1e-6),
                "scale of {:?}: {a} vs {b}",
                fresh.tokens[id]
            );
            let row = |t: &StaticTable| -> Vec<f64> {
                t.components[id * dimension..(id + 1) * dimension]
                    .iter()
                    .map(|&q| f64::from(q as i8) * f64::from(t.scales[id]))
                    .collect()
            };
            let (x, y) = (row(&fresh), row(&committed));
            let dot: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            let norms = x.iter().map(|a| a * a).sum::<f64>().sqrt()
                * y.iter().map(|b| b * b).sum::<f64>().sqrt();
            if norms > 0.0 {
                worst_cosine = worst_cosine.min(dot / norms);
            } else {
                assert_eq!(norms, 0.0);
            }
        }
        assert!(worst_cosine > 0.9999, "worst token cosine {worst_cosine}");
    }
}

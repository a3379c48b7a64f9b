//! The product of a few rows (a question, a short text) with a linear layer's weight.
//!
//! A general matrix product first copies the weight into blocks of its own layout,
//! which pays off over thousands of rows; for a dozen rows that copy of every weight
//! costs more than the multiply-adds (a 12-token question took 21 ms through `gemm`
//! and takes 8 ms here, on one core of the machine in docs/measurements-2026-12.md).
//! So each layer also keeps its weight in bands of 8 output columns, each band stored
//! row after row; a pass walks a band once while up to 12 input rows accumulate in 12
//! AVX registers, and prefetches the weight 16 KiB ahead, since a question's pass
//! streams the whole model (42 MB for MiniLM, more than the cache) from memory.

/// Rows up to which [`small_product`] is used: on MiniLM it is faster than `gemm` up to
/// about 96 rows (8 against 21 ms at 12, 34 against 44 ms at 48, even at 96).
pub(crate) const SMALL_ROWS: usize = 64;

/// `w` (`inputs × outputs`, row-major) as bands of 8 output columns, each band
/// `inputs × 8` contiguous; the last columns of a width that is not a multiple of 8
/// are left out (they are read from `w`).
pub(crate) fn bands(w: &[f32], inputs: usize, outputs: usize) -> Vec<f32> {
    let bands = outputs / BAND;
    let mut out = Vec::with_capacity(bands * inputs * BAND);
    for band in 0..bands {
        for row in w.chunks_exact(outputs) {
            out.extend_from_slice(&row[band * BAND..][..BAND]);
        }
    }
    out
}

/// `out += x · w` for `rows` rows: `x` is `rows × inputs`, `w` is `inputs × outputs`,
/// `out` is `rows × outputs`, all row-major; `bands` is `w` as [`bands`] lays it out.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn small_product(
    x: &[f32],
    rows: usize,
    bands: &[f32],
    w: &[f32],
    inputs: usize,
    outputs: usize,
    out: &mut [f32],
) {
    assert_eq!(x.len(), rows * inputs, "small product input shape");
    assert_eq!(w.len(), inputs * outputs, "small product weight shape");
    assert_eq!(out.len(), rows * outputs, "small product output shape");
    let full = outputs / BAND;
    assert_eq!(
        bands.len(),
        full * inputs * BAND,
        "small product bands shape"
    );
    for band in 0..full {
        let column = band * BAND;
        let mut row = 0;
        while row < rows {
            let take = (rows - row).min(TILE);
            // SAFETY: rows `row..row + take` of `x` and `out`, and columns
            // `column..column + BAND` of `w` and `out`, lie inside the slices checked above.
            unsafe {
                let (x, out) = (
                    x.as_ptr().add(row * inputs),
                    out.as_mut_ptr().add(row * outputs + column),
                );
                let w = bands.as_ptr().add(band * inputs * BAND);
                match take {
                    12 => band_rows::<12>(x, inputs, w, outputs, out),
                    11 => band_rows::<11>(x, inputs, w, outputs, out),
                    10 => band_rows::<10>(x, inputs, w, outputs, out),
                    9 => band_rows::<9>(x, inputs, w, outputs, out),
                    8 => band_rows::<8>(x, inputs, w, outputs, out),
                    7 => band_rows::<7>(x, inputs, w, outputs, out),
                    6 => band_rows::<6>(x, inputs, w, outputs, out),
                    5 => band_rows::<5>(x, inputs, w, outputs, out),
                    4 => band_rows::<4>(x, inputs, w, outputs, out),
                    3 => band_rows::<3>(x, inputs, w, outputs, out),
                    2 => band_rows::<2>(x, inputs, w, outputs, out),
                    _ => band_rows::<1>(x, inputs, w, outputs, out),
                }
            }
            row += take;
        }
    }
    // The last columns, fewer than a band (none on BERT's widths): plainly.
    let done = full * BAND;
    if done < outputs {
        for (x_row, out_row) in x.chunks_exact(inputs).zip(out.chunks_exact_mut(outputs)) {
            for (&value, w_row) in x_row.iter().zip(w.chunks_exact(outputs)) {
                out_row[done..]
                    .iter_mut()
                    .zip(&w_row[done..])
                    .for_each(|(o, w)| *o += value * w);
            }
        }
    }
}

/// Output columns one pass of [`band_rows`] covers: one register of 8 lanes.
const BAND: usize = 8;

/// Rows one pass of [`band_rows`] covers at most: 12 sums, one weight row and one
/// broadcast input fill 14 of the 16 AVX registers, and a question's dozen tokens read
/// each weight once.
#[cfg(target_arch = "x86_64")]
const TILE: usize = 12;

/// How far ahead of the weight row being read its band is fetched into cache, in floats.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 4096;

/// `out[r][0..8] += Σ_k x[r][k] · w[k][0..8]` for `R` rows, the R sums in registers.
///
/// # Safety
/// AVX2 and FMA; `x` holds `R` rows of `inputs` floats `inputs` apart, `w` holds
/// `inputs` rows of 8 floats one after another (a band), `out` holds `R` rows of 8
/// floats `outputs` apart. The prefetch may point past the band (it never faults).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn band_rows<const R: usize>(
    x: *const f32,
    inputs: usize,
    w: *const f32,
    outputs: usize,
    out: *mut f32,
) {
    use std::arch::x86_64::*;
    // SAFETY: every pointer below stays inside the ranges the caller promises.
    unsafe {
        let mut sums = [_mm256_setzero_ps(); R];
        for (r, sum) in sums.iter_mut().enumerate() {
            *sum = _mm256_loadu_ps(out.add(r * outputs));
        }
        for k in 0..inputs {
            _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(k * BAND + PREFETCH).cast());
            let weight = _mm256_loadu_ps(w.add(k * BAND));
            for (r, sum) in sums.iter_mut().enumerate() {
                let value = _mm256_broadcast_ss(&*x.add(r * inputs + k));
                *sum = _mm256_fmadd_ps(value, weight, *sum);
            }
        }
        for (r, sum) in sums.iter().enumerate() {
            _mm256_storeu_ps(out.add(r * outputs), *sum);
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn small_product_equals_the_plain_sum_on_every_shape() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            println!("SKIPPED small_product_equals_the_plain_sum_on_every_shape: this CPU has no AVX2+FMA");
            return;
        }
        let mut next = crate::tests::uniform(3);
        for rows in 1..=13 {
            for (inputs, outputs) in [(8, 16), (37, 40), (5, 7), (24, 48), (1, 33)] {
                let x: Vec<f32> = (0..rows * inputs).map(|_| next()).collect();
                let w: Vec<f32> = (0..inputs * outputs).map(|_| next()).collect();
                let bias: Vec<f32> = (0..outputs).map(|_| next()).collect();
                let mut out: Vec<f32> = (0..rows).flat_map(|_| bias.iter().copied()).collect();
                // SAFETY: the CPU has AVX2 and FMA, as checked above.
                let bands = bands(&w, inputs, outputs);
                unsafe { small_product(&x, rows, &bands, &w, inputs, outputs, &mut out) };
                for r in 0..rows {
                    for c in 0..outputs {
                        let want = f64::from(bias[c])
                            + (0..inputs)
                                .map(|k| {
                                    f64::from(x[r * inputs + k]) * f64::from(w[k * outputs + c])
                                })
                                .sum::<f64>();
                        let got = f64::from(out[r * outputs + c]);
                        assert!(
                            (got - want).abs() < 1e-5,
                            "{rows}×{inputs}·{inputs}×{outputs} at ({r}, {c}): {got} against {want}"
                        );
                    }
                }
            }
        }
    }
}

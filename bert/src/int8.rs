//! Linear layers in 8-bit integers, on CPUs with VNNI (`vpdpbusd`).
//!
//! A float32 multiply-add does one product per lane; `vpdpbusd` multiplies four
//! unsigned bytes by four signed bytes and adds the four products to a 32-bit lane,
//! so one instruction does 32 products on eight lanes. Each output column's weight is
//! quantized once, at load, to `[-127, 127]` with its own scale `s_w[j]`; each input
//! row is quantized on the fly to `[0, 255]` over its own range, `x ≈ low + step ·
//! byte`, so `y[i][j] = b[j] + s_w[j] · (step[i] · Σₖ byte[i][k] · q(w)[k][j] + low[i]
//! · Σₖ q(w)[k][j])`. Two refinements keep the vectors within 1e-3 cosine of float32's:
//! each input channel's range is shared with its weights before either is rounded
//! (calibrated migration, [`MIGRATION`]), and the feed-forward layers' inputs are
//! rounded in two parts (the row, then what its rounding left: two byte rows summed,
//! about 16 bits for twice the integer work).
//!
//! The weight is stored as bands of 16 output columns; within a band, for each group
//! of 4 inputs, the 4 bytes of column 0, then of column 1, and so on (64 bytes), which
//! is what two `vpdpbusd` on 8 lanes each read against one broadcast group of 4 input
//! bytes. A tile of up to [`TILE`] rows keeps its `TILE × 2` sums in registers while
//! the band streams past once.

use std::cell::Cell;

use rayon::prelude::*;

/// Output columns of one band: two registers of eight 32-bit lanes.
const BAND: usize = 16;

/// Inputs one `vpdpbusd` lane sums: four bytes.
const GROUP: usize = 4;

/// Bytes of one group of one band: [`GROUP`] bytes for each of [`BAND`] columns.
const GROUP_BYTES: usize = GROUP * BAND;

/// Rows one pass over a band covers at most: 12 sums, two weight registers and the
/// broadcast input fill 15 of the 16 AVX registers.
const TILE: usize = 6;

/// How much of an input channel's range moves into the weight (SmoothQuant's α): `m[k]
/// = range[k]^α / max_j |w[k][j]|^(1−α)`. 0.4 kept every vector of a LoCoMo
/// conversation's 1,751 texts and questions within 1e-3 cosine of float32's; 0.5 and
/// 0.6 did not.
const MIGRATION: f32 = 0.4;

/// Rows below which one product is not split over threads (each thread re-reads the
/// whole weight, which only pays off over enough rows).
const PARALLEL_ROWS: usize = 96;

/// Which `vpdpbusd` this CPU has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vnni {
    /// AVX-VNNI (VEX encoded; Alder Lake, Zen 5 and later).
    Avx,
    /// AVX512-VNNI with AVX512-VL, used on 256-bit registers (Ice Lake, Zen 4 and later).
    Avx512,
}

impl Vnni {
    /// The VNNI instruction this CPU runs, if any (with AVX2 and FMA beside it).
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if !(has!("avx2") && has!("fma")) {
                return None;
            }
            if has!("avxvnni") {
                return Some(Self::Avx);
            }
            if has!("avx512vnni") && has!("avx512vl") {
                return Some(Self::Avx512);
            }
        }
        None
    }
}

/// A linear layer's weight quantized to 8 bits per output column, laid out in bands.
pub(crate) struct Int8Weight {
    /// The quantized weight: band after band of `groups` × [`GROUP_BYTES`] bytes; the
    /// last band and the last group are padded with zeros.
    packed: Vec<i8>,
    /// Each output column's scale (its largest absolute weight over 127); 0 in padding.
    scales: Vec<f32>,
    /// `Σₖ q(w)[k][j]` per output column: multiplied by a row's low end, what the
    /// row's shift from zero adds.
    sums: Vec<f32>,
    /// `1 / m[k]` per input channel: each input is divided by its channel's migration
    /// factor before rounding, the weight's row `k` having been multiplied by it.
    migration: Vec<f32>,
    /// Groups of [`GROUP`] inputs (the input width rounded up).
    groups: usize,
    /// Width of an input row.
    inputs: usize,
    /// Width of an output row.
    outputs: usize,
    /// Each input row is rounded twice: the row, then what the first rounding left
    /// (two byte rows, both multiplied and summed), so the inputs carry about 16 bits.
    /// For a layer whose inputs 8 bits coarsen too much (BERT's second feed-forward
    /// layer: a GELU's output, a few large values among many small ones).
    two_parts: bool,
}

impl Int8Weight {
    /// Quantize `w` (`inputs × outputs`, row-major). With `ranges` (each input
    /// channel's largest absolute value seen), channel `k` is first scaled by
    /// `m[k] = range[k]^α / max_j |w[k][j]|^(1−α)` ([`MIGRATION`]): its inputs are
    /// divided by `m[k]` and its weights multiplied, which leaves the product as it is
    /// and evens out the ranges of both sides (SmoothQuant). `two_parts`: see
    /// [`Int8Weight::two_parts`].
    pub(crate) fn new(
        w: &[f32],
        inputs: usize,
        outputs: usize,
        ranges: Option<&[f32]>,
        two_parts: bool,
    ) -> Self {
        assert_eq!(w.len(), inputs * outputs, "int8 weight shape");
        let migration: Vec<f32> = match ranges {
            Some(ranges) => {
                assert_eq!(ranges.len(), inputs, "int8 ranges shape");
                ranges
                    .iter()
                    .zip(w.chunks_exact(outputs))
                    .map(|(&range, row)| {
                        let weight = row.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                        if range > 0.0 && weight > 0.0 && range.is_finite() {
                            (range.powf(MIGRATION) / weight.powf(1.0 - MIGRATION)).clamp(1e-3, 1e3)
                        } else {
                            1.0
                        }
                    })
                    .collect()
            }
            None => vec![1.0; inputs],
        };
        let w: Vec<f32> = w
            .chunks_exact(outputs)
            .zip(&migration)
            .flat_map(|(row, &m)| row.iter().map(move |v| v * m))
            .collect();
        let groups = inputs.div_ceil(GROUP);
        let bands = outputs.div_ceil(BAND);
        let mut scales = vec![0.0f32; bands * BAND];
        for row in w.chunks_exact(outputs) {
            for (scale, &value) in scales.iter_mut().zip(row) {
                *scale = scale.max(value.abs());
            }
        }
        for scale in &mut scales {
            *scale /= 127.0;
        }
        let mut packed = vec![0i8; bands * groups * GROUP_BYTES];
        let mut sums = vec![0.0f32; bands * BAND];
        for k in 0..inputs {
            for j in 0..outputs {
                let scale = scales[j];
                let q = if scale > 0.0 {
                    (w[k * outputs + j] / scale).round().clamp(-127.0, 127.0) as i8
                } else {
                    0
                };
                let (band, column) = (j / BAND, j % BAND);
                let (group, lane) = (k / GROUP, k % GROUP);
                packed[(band * groups + group) * GROUP_BYTES + column * GROUP + lane] = q;
                sums[j] += f32::from(q);
            }
        }
        Self {
            packed,
            scales,
            sums,
            migration: migration.iter().map(|m| 1.0 / m).collect(),
            groups,
            inputs,
            outputs,
            two_parts,
        }
    }

    /// Bytes the quantized weight holds (for the load log).
    pub(crate) fn bytes(&self) -> usize {
        self.packed.len() + 8 * self.scales.len()
    }
}

/// Buffers of the quantized inputs, kept per thread between products.
#[derive(Default)]
struct Inputs {
    /// Each row's bytes, `groups × 4` per row: `(x − low) / step`, rounded.
    bytes: Vec<u8>,
    /// Each row's step (its range over 255).
    scales: Vec<f32>,
    /// Each row's smallest value: what byte 0 stands for.
    lows: Vec<f32>,
    /// One row times the migration, before rounding.
    scaled: Vec<f32>,
    /// What one row's first rounding left (two-part rows).
    rest: Vec<f32>,
}

thread_local! {
    /// This thread's quantized inputs.
    static INPUTS: Cell<Inputs> = Cell::new(Inputs::default());
}

/// `out += x · W` for `rows` rows of `x` (`rows × inputs`), `out` being `rows × outputs`
/// (it holds the bias already), with the weight quantized and `x` quantized per row.
/// `threads` above 1 splits the rows over the current rayon pool.
pub(crate) fn product(
    vnni: Vnni,
    x: &[f32],
    rows: usize,
    w: &Int8Weight,
    out: &mut [f32],
    threads: usize,
) {
    assert_eq!(x.len(), rows * w.inputs, "int8 product input shape");
    assert_eq!(out.len(), rows * w.outputs, "int8 product output shape");
    if rows == 0 {
        return;
    }
    if threads > 1 && rows >= PARALLEL_ROWS {
        let per = rows.div_ceil(threads).div_ceil(TILE) * TILE;
        x.par_chunks(per * w.inputs)
            .zip(out.par_chunks_mut(per * w.outputs))
            .for_each(|(x, out)| product(vnni, x, x.len() / w.inputs, w, out, 1));
        return;
    }
    let mut inputs = INPUTS.with(Cell::take);
    let stride = w.groups * GROUP;
    let parts = if w.two_parts { 2 } else { 1 };
    // SAFETY: `vnni` comes from `detect`, which requires AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        quantize_rows_avx2(x, &w.migration, stride, parts, &mut inputs)
    };
    #[cfg(not(target_arch = "x86_64"))]
    quantize_rows(x, &w.migration, stride, parts, &mut inputs, round_row);
    // SAFETY: `detect` returned `vnni` only where the CPU has that VNNI, AVX2 and FMA;
    // the buffers have the shapes the kernel reads (checked above and in `quantize_rows`).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match vnni {
            Vnni::Avx => kernel_avx(&inputs, parts, w, out),
            Vnni::Avx512 => kernel_avx512(&inputs, parts, w, out),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = vnni;
    if inputs.bytes.capacity() > 16 << 20 {
        inputs = Inputs::default();
    }
    INPUTS.with(|cell| cell.set(inputs));
}

/// Quantize each row of `x` (`migration.len()` wide) to bytes `stride` apart: each value
/// times its channel's `migration`, then `round((v − low) / step)` with `low` the row's
/// smallest such value and `step` its range over 255 (all 256 levels, whatever the
/// row's sign: a GELU's output, nearly all positive, gets twice the resolution a
/// symmetric scale would give it). With `parts` 2, each row is followed by the same
/// rounding of what the first one left (`value − low − step · byte`). `round` rounds
/// one row ([`round_row`]).
#[inline(always)]
fn quantize_rows(
    x: &[f32],
    migration: &[f32],
    stride: usize,
    parts: usize,
    into: &mut Inputs,
    round: impl Fn(&[f32], &mut [u8]) -> (f32, f32),
) {
    let inputs = migration.len();
    let rows = x.len() / inputs;
    let Inputs {
        bytes,
        scales,
        lows,
        scaled,
        rest,
    } = into;
    bytes.clear();
    bytes.resize(rows * parts * stride, 0);
    scales.clear();
    lows.clear();
    scaled.resize(inputs, 0.0);
    rest.resize(inputs, 0.0);
    for (row, bytes) in x
        .chunks_exact(inputs)
        .zip(bytes.chunks_exact_mut(parts * stride))
    {
        let (first, second) = bytes.split_at_mut(stride);
        for ((scaled, &value), &k) in scaled.iter_mut().zip(row).zip(migration) {
            *scaled = value * k;
        }
        let (step, low) = round(scaled, first);
        scales.push(step);
        lows.push(low);
        if parts > 1 {
            for ((rest, &value), &byte) in rest.iter_mut().zip(&*scaled).zip(&*first) {
                *rest = value - (low + step * f32::from(byte));
            }
            let (step, low) = round(rest, second);
            scales.push(step);
            lows.push(low);
        }
    }
}

/// [`quantize_rows`] compiled for AVX2 and FMA, rounding with [`round_row_avx2`].
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_rows_avx2(
    x: &[f32],
    migration: &[f32],
    stride: usize,
    parts: usize,
    into: &mut Inputs,
) {
    // SAFETY: this function runs only where the CPU has AVX2 and FMA.
    quantize_rows(x, migration, stride, parts, into, |values, bytes| unsafe {
        round_row_avx2(values, bytes)
    });
}

/// The range of `values`: `(step, low)` with `step` the range over 255 (0 for a
/// constant or non-finite row, whose bytes then stand for `low`).
#[inline(always)]
fn step_of(low: f32, high: f32) -> (f32, f32) {
    let step = if high > low && (high - low).is_finite() {
        (high - low) / 255.0
    } else {
        0.0
    };
    (step, if low.is_finite() { low } else { 0.0 })
}

/// Round `values` into `bytes` over their own range: returns `(step, low)`, with
/// `value ≈ low + step · byte`. The portable build (CPUs without VNNI never get here;
/// the tests compare the vector build with it).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn round_row(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
    let (low, high) = values
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(low, high), &v| {
            (low.min(v), high.max(v))
        });
    let (step, low) = step_of(low, high);
    let inverse = if step > 0.0 { 1.0 / step } else { 0.0 };
    for (byte, value) in bytes.iter_mut().zip(values) {
        *byte = ((value - low) * inverse)
            .round_ties_even()
            .clamp(0.0, 255.0) as u8;
    }
    (step, low)
}

/// [`round_row`] with eight lanes at a time: the range by `vminps`/`vmaxps`, the bytes
/// by `vcvtps2dq` (ties to even) and two saturating packs.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn round_row_avx2(values: &[f32], bytes: &mut [u8]) -> (f32, f32) {
    use std::arch::x86_64::*;
    let lanes = values.len() / 8 * 8;
    let (mut low, mut high) = (f32::INFINITY, f32::NEG_INFINITY);
    // SAFETY: every load reads 8 floats at `i < lanes`, inside `values`; every store
    // writes 8 bytes at `i < lanes ≤ bytes.len()`.
    unsafe {
        if lanes > 0 {
            let (mut lows, mut highs) = (_mm256_set1_ps(low), _mm256_set1_ps(high));
            for i in (0..lanes).step_by(8) {
                let v = _mm256_loadu_ps(values.as_ptr().add(i));
                lows = _mm256_min_ps(lows, v);
                highs = _mm256_max_ps(highs, v);
            }
            let (mut l, mut h) = ([0.0f32; 8], [0.0f32; 8]);
            _mm256_storeu_ps(l.as_mut_ptr(), lows);
            _mm256_storeu_ps(h.as_mut_ptr(), highs);
            low = l.iter().fold(low, |a, &b| a.min(b));
            high = h.iter().fold(high, |a, &b| a.max(b));
        }
        for &v in &values[lanes..] {
            (low, high) = (low.min(v), high.max(v));
        }
        let (step, low) = step_of(low, high);
        let inverse = if step > 0.0 { 1.0 / step } else { 0.0 };
        assert!(bytes.len() >= values.len(), "round_row_avx2 bytes");
        let (shift, scale) = (_mm256_set1_ps(low), _mm256_set1_ps(inverse));
        let (zero, top) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        for i in (0..lanes).step_by(8) {
            let v = _mm256_loadu_ps(values.as_ptr().add(i));
            let t = _mm256_mul_ps(_mm256_sub_ps(v, shift), scale);
            let t = _mm256_min_ps(_mm256_max_ps(t, zero), top);
            let n = _mm256_cvtps_epi32(t);
            let words =
                _mm_packus_epi32(_mm256_castsi256_si128(n), _mm256_extracti128_si256::<1>(n));
            let eight = _mm_packus_epi16(words, words);
            _mm_storel_epi64(bytes.as_mut_ptr().add(i).cast(), eight);
        }
        for (byte, value) in bytes[lanes..].iter_mut().zip(&values[lanes..]) {
            *byte = ((value - low) * inverse)
                .round_ties_even()
                .clamp(0.0, 255.0) as u8;
        }
        (step, low)
    }
}

/// The kernels of one VNNI flavour: `$name` runs every band over every tile of rows;
/// `$tile` is one tile.
macro_rules! kernels {
    ($name:ident, $tile:ident, $features:literal, $dpbusd:ident) => {
        /// `out[i / parts][j] += s_w[j] · (step[i] · Σₖ byte[i][k] · q(w)[k][j] + low[i] ·
        /// Σₖ q(w)[k][j])` for every byte row `i` and column `j`.
        ///
        /// # Safety
        /// The CPU has the features named; `inputs` holds `rows` byte rows of `groups ×
        /// 4` and their steps and lows, `out` `rows / parts × outputs`.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(inputs: &Inputs, parts: usize, w: &Int8Weight, out: &mut [f32]) {
            let rows = inputs.scales.len();
            let Inputs {
                bytes,
                scales,
                lows,
                ..
            } = inputs;
            let stride = w.groups * GROUP;
            assert_eq!(lows.len(), rows, "int8 kernel lows");
            assert_eq!(bytes.len(), rows * stride, "int8 kernel input shape");
            assert_eq!(scales.len(), rows, "int8 kernel scales");
            assert_eq!(
                out.len() * parts,
                rows * w.outputs,
                "int8 kernel output shape"
            );
            let bands = w.outputs.div_ceil(BAND);
            for band in 0..bands {
                let mut row = 0;
                while row < rows {
                    let take = (rows - row).min(TILE);
                    // SAFETY: rows `row..row + take` and the band's columns lie inside
                    // the buffers checked above; the band's weights inside `packed`.
                    unsafe {
                        let tile = Tile {
                            bytes: bytes.as_ptr().add(row * stride),
                            stride,
                            scales: scales.as_ptr().add(row),
                            lows: lows.as_ptr().add(row),
                            band,
                            out: out.as_mut_ptr(),
                            first: row,
                            parts,
                        };
                        match take {
                            6 => $tile::<6>(&tile, w),
                            5 => $tile::<5>(&tile, w),
                            4 => $tile::<4>(&tile, w),
                            3 => $tile::<3>(&tile, w),
                            2 => $tile::<2>(&tile, w),
                            _ => $tile::<1>(&tile, w),
                        }
                    }
                    row += take;
                }
            }
        }

        /// One tile of `R` rows against one band: the sums in registers, then scaled
        /// into `out`.
        ///
        /// # Safety
        /// As for the kernel; `tile` points at `R` rows.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[inline]
        unsafe fn $tile<const R: usize>(tile: &Tile, w: &Int8Weight) {
            use std::arch::x86_64::*;
            // SAFETY: every pointer stays inside the ranges the caller promises.
            unsafe {
                let weights = w.packed.as_ptr().add(tile.band * w.groups * GROUP_BYTES);
                let mut sums = [[_mm256_setzero_si256(); 2]; R];
                for group in 0..w.groups {
                    let at = weights.add(group * GROUP_BYTES);
                    _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(1024).cast());
                    let low = _mm256_loadu_si256(at.cast());
                    let high = _mm256_loadu_si256(at.add(32).cast());
                    for (r, sum) in sums.iter_mut().enumerate() {
                        let input = _mm256_set1_epi32(
                            tile.bytes
                                .add(r * tile.stride + group * GROUP)
                                .cast::<i32>()
                                .read_unaligned(),
                        );
                        sum[0] = $dpbusd(sum[0], input, low);
                        sum[1] = $dpbusd(sum[1], input, high);
                    }
                }
                let column = tile.band * BAND;
                let full = column + BAND <= w.outputs;
                for (r, sum) in sums.iter().enumerate() {
                    // Both parts of a two-part row add into its one output row.
                    let target = (tile.first + r) / tile.parts;
                    let step = _mm256_set1_ps(*tile.scales.add(r));
                    let low = _mm256_set1_ps(*tile.lows.add(r));
                    let mut values = [0.0f32; BAND];
                    for (half, sum) in sum.iter().enumerate() {
                        let at = column + half * 8;
                        // (step · Σ bytes · q(w) + low · Σ q(w)) · s_w
                        let shift = _mm256_mul_ps(low, _mm256_loadu_ps(w.sums.as_ptr().add(at)));
                        let value = _mm256_mul_ps(
                            _mm256_fmadd_ps(_mm256_cvtepi32_ps(*sum), step, shift),
                            _mm256_loadu_ps(w.scales.as_ptr().add(at)),
                        );
                        if full {
                            let out = tile.out.add(target * w.outputs + at);
                            _mm256_storeu_ps(out, _mm256_add_ps(_mm256_loadu_ps(out), value));
                        } else {
                            _mm256_storeu_ps(values.as_mut_ptr().add(half * 8), value);
                        }
                    }
                    if !full {
                        let out = tile.out.add(target * w.outputs + column);
                        for (c, value) in values.iter().enumerate().take(w.outputs - column) {
                            *out.add(c) += value;
                        }
                    }
                }
            }
        }
    };
}

/// Where one tile's rows are.
struct Tile {
    /// The first row's quantized bytes.
    bytes: *const u8,
    /// Bytes from one row to the next.
    stride: usize,
    /// The first row's step.
    scales: *const f32,
    /// The first row's low end.
    lows: *const f32,
    /// The band of output columns.
    band: usize,
    /// The output's first row (column 0).
    out: *mut f32,
    /// The tile's first byte row.
    first: usize,
    /// Byte rows per output row (1, or 2 for two-part rows).
    parts: usize,
}

kernels!(
    kernel_avx,
    tile_avx,
    "avx2,fma,avxvnni",
    _mm256_dpbusd_avx_epi32
);
kernels!(
    kernel_avx512,
    tile_avx512,
    "avx2,fma,avx512vnni,avx512vl",
    _mm256_dpbusd_epi32
);

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The quantized product against the float one: each output within the error the
    /// two roundings allow, on widths that are and are not multiples of a band and a group.
    #[test]
    fn int8_product_is_within_its_rounding_of_the_float_product() {
        let Some(found) = Vnni::detect() else {
            println!("SKIPPED int8_product_is_within_its_rounding_of_the_float_product: this CPU has no VNNI");
            return;
        };
        let mut flavours = vec![found];
        if found == Vnni::Avx
            && std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            flavours.push(Vnni::Avx512);
        }
        let mut next = crate::tests::uniform(7);
        for vnni in flavours {
            for rows in [1, 2, 5, 6, 7, 13, 200] {
                for (inputs, outputs) in [(8, 16), (37, 40), (5, 7), (384, 48), (1, 33)] {
                    let x: Vec<f32> = (0..rows * inputs).map(|_| next()).collect();
                    let w: Vec<f32> = (0..inputs * outputs).map(|_| next()).collect();
                    let bias: Vec<f32> = (0..outputs).map(|_| next()).collect();
                    // Without migration, and with channel ranges far apart.
                    let ranges: Vec<f32> = (0..inputs)
                        .map(|k| if k % 3 == 0 { 40.0 } else { 0.5 })
                        .collect();
                    for (ranges, threads, two_parts) in [
                        (None, 1, false),
                        (None, 2, false),
                        (Some(&ranges[..]), 1, false),
                        (None, 1, true),
                        (Some(&ranges[..]), 2, true),
                    ] {
                        let quantized = Int8Weight::new(&w, inputs, outputs, ranges, two_parts);
                        let m = &quantized.migration;
                        let mut out: Vec<f32> =
                            (0..rows).flat_map(|_| bias.iter().copied()).collect();
                        product(vnni, &x, rows, &quantized, &mut out, threads);
                        for r in 0..rows {
                            let row = &x[r * inputs..][..inputs];
                            let (low, high) = row
                                .iter()
                                .zip(m)
                                .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), (v, k)| {
                                    (l.min(v * k), h.max(v * k))
                                });
                            // Two parts: the second rounds the first's error, half a step
                            // at most, over 255 steps.
                            let x_step = (high - low) / 255.0 / if two_parts { 255.0 } else { 1.0 };
                            for c in 0..outputs {
                                let w_step = quantized.scales[c];
                                let mut want = f64::from(bias[c]);
                                let mut bound = 1e-5;
                                for (k, &value) in row.iter().enumerate() {
                                    want += f64::from(value) * f64::from(w[k * outputs + c]);
                                    // The bound in the migrated space.
                                    let (value, weight) = (value * m[k], w[k * outputs + c] / m[k]);
                                    bound += f64::from(
                                        0.5 * x_step * weight.abs()
                                            + 0.5 * w_step * value.abs()
                                            + 0.25 * x_step * w_step,
                                    );
                                }
                                let got = f64::from(out[r * outputs + c]);
                                assert!(
                                    (got - want).abs() <= bound,
                                    "{vnni:?} {rows}×{inputs}·{inputs}×{outputs} at ({r}, {c}): {got} against {want} (bound {bound})"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The vector rounding gives the portable one's bytes, step and low, on row widths
    /// around the lane count, constant rows and rows with exact ties.
    #[test]
    fn vector_rounding_equals_the_portable_rounding() {
        if Vnni::detect().is_none() {
            println!("SKIPPED vector_rounding_equals_the_portable_rounding: this CPU has no VNNI");
            return;
        }
        let mut next = crate::tests::uniform(11);
        let mut rows: Vec<Vec<f32>> = [1, 7, 8, 9, 16, 31, 384, 1536]
            .iter()
            .map(|&n| (0..n).map(|_| next() * 3.0).collect())
            .collect();
        rows.push(vec![0.25; 13]);
        rows.push((0..20).map(|i| i as f32 * 0.5).collect());
        for row in rows {
            let (mut a, mut b) = (vec![0u8; row.len()], vec![0u8; row.len()]);
            let portable = round_row(&row, &mut a);
            // SAFETY: VNNI implies AVX2 and FMA here (`detect`).
            let vector = unsafe { round_row_avx2(&row, &mut b) };
            assert_eq!(portable, vector, "{} values", row.len());
            assert_eq!(a, b, "{} values", row.len());
        }
    }

    #[test]
    fn zero_rows_and_zero_weights_give_the_bias() {
        let Some(vnni) = Vnni::detect() else {
            println!("SKIPPED zero_rows_and_zero_weights_give_the_bias: this CPU has no VNNI");
            return;
        };
        let quantized = Int8Weight::new(&[0.0; 24], 4, 6, None, false);
        let mut out = vec![1.5f32; 12];
        product(vnni, &[0.0; 8], 2, &quantized, &mut out, 1);
        assert_eq!(out, vec![1.5f32; 12]);
    }
}

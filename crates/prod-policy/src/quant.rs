//! Block-quantised weights for decoding. Decoding a few samples is memory-bound: every token
//! reads every weight once (540 MB in f32 at the SmolLM2-135M shape), so fewer bytes per
//! weight is the only way to more tokens per second. Each weight row is cut into blocks of
//! [`BLOCK`] weights stored as `w ≈ scale · q + min` with `q` in 4 or 8 bits.
//!
//! A chunk of 64 rows is stored in 4 bits only when that is exact (every block already lies on a
//! 16-step grid, as in a model imported from a Q4 GGUF file: decoding then uses the very
//! weights the file holds); otherwise in 8 bits, where each weight is within `(max − min) / 510`
//! of its block's f32 value. Inference only: training always uses the f32 weights.

use std::collections::HashMap;

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor, TensorId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Weights per block (one scale and one minimum each).
pub const BLOCK: usize = 32;
/// Weight rows per parallel task.
const CHUNK: usize = 64;
/// Rows of `x` per pass over the weights.
const ROWS: usize = 8;
/// Passes over fewer bytes of weights (times rows of `x`) stay on the calling thread.
const PARALLEL_BYTES: usize = 1 << 20;

/// Which weights the decoding steps of sampling read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecodeWeights {
    /// The model's own f32 weights (exact).
    #[default]
    F32,
    /// Block-quantised copies (see the module documentation): 4 bits where exact, else 8.
    Q8,
}

impl DecodeWeights {
    pub fn is_f32(&self) -> bool {
        *self == DecodeWeights::F32
    }

    /// The faster of the two on this CPU: `Q8` where its kernel runs (AVX-512), else `F32` —
    /// the portable Q8 kernel is many times slower than the f32 matrix product, so a machine
    /// without AVX-512 samples far faster from the f32 weights.
    pub fn fastest_here() -> Self {
        if crate::decode::available() {
            DecodeWeights::Q8
        } else {
            DecodeWeights::F32
        }
    }
}

impl std::str::FromStr for DecodeWeights {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(DecodeWeights::F32),
            "q8" => Ok(DecodeWeights::Q8),
            other => Err(format!(
                "unknown decode weights '{other}' (expected f32 or q8)"
            )),
        }
    }
}

impl std::fmt::Display for DecodeWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeWeights::F32 => "f32",
            DecodeWeights::Q8 => "q8",
        })
    }
}

/// One weight matrix `[n, k]` in blocks along `k`, in chunks of [`CHUNK`] rows that each have
/// their own width (a model imported from a Q4 GGUF keeps 4 bits everywhere except the rows
/// added for ProD's special tokens).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    n: usize,
    k: usize,
    /// Per chunk: its width (4 or 8) and where its codes start in `q`.
    chunks: Vec<(u32, usize)>,
    /// Row-major blocks. 8 bits: one byte per weight. 4 bits: 16 bytes per block, byte `t`
    /// holding weight `t` in its low nibble and weight `t + 16` in its high one (GGUF's order).
    q: Vec<u8>,
    /// Per block, `n · k / BLOCK` each.
    scale: Vec<f32>,
    min: Vec<f32>,
}

/// The block's `(scale, min)` for `levels` steps, and whether `q · scale + min` gives back
/// every weight to within rounding.
fn block_grid(b: &[f32], levels: f32) -> (f32, f32, bool) {
    let (mut lo, mut hi) = (b[0], b[0]);
    for &w in b {
        lo = lo.min(w);
        hi = hi.max(w);
    }
    let scale = (hi - lo) / levels;
    if scale == 0.0 {
        return (0.0, lo, true);
    }
    // Rounding of the grid's own arithmetic: relative to the step and to the values' size.
    let tol = (hi - lo) * 1e-6 + 8.0 * f32::EPSILON * lo.abs().max(hi.abs());
    let inv = 1.0 / scale;
    let exact = b
        .iter()
        .all(|&w| (level(w, inv, lo, levels) as f32 * scale + lo - w).abs() <= tol);
    (scale, lo, exact)
}

/// The nearest step of `w` on the grid `min + q / inv` (`w ≥ min`; a cast, not libm's round:
/// quantising a model is a hot loop).
#[inline]
fn level(w: f32, inv: f32, min: f32, levels: f32) -> u8 {
    ((w - min) * inv + 0.5).min(levels) as u8
}

/// Code `t` of one block's bytes.
fn code(bits: u32, block: &[u8], t: usize) -> u8 {
    if bits == 8 {
        block[t]
    } else if t < BLOCK / 2 {
        block[t] & 15
    } else {
        block[t - BLOCK / 2] >> 4
    }
}

/// The f32 contents of a CPU tensor without copying them.
fn with_f32_slice<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Option<R> {
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(CpuStorage::F32(data)) = &*storage else {
        return None;
    };
    let (a, b) = layout.contiguous_offsets()?;
    Some(f(&data[a..b]))
}

impl QuantMatrix {
    /// `w` is `[n, k]` row-major. `None` when `k` is not a multiple of [`BLOCK`] or a weight
    /// is not finite (such a matrix stays in f32).
    pub fn quantize(w: &[f32], n: usize, k: usize) -> Option<QuantMatrix> {
        if k == 0
            || !k.is_multiple_of(BLOCK)
            || w.len() != n * k
            || !w.par_iter().all(|x| x.is_finite())
        {
            return None;
        }
        let blocks = n * k / BLOCK;
        let mut scale = vec![0f32; blocks];
        let mut min = vec![0f32; blocks];
        let parts: Vec<(u32, Vec<u8>)> = w
            .par_chunks(CHUNK * k)
            .zip(
                scale
                    .par_chunks_mut(CHUNK * k / BLOCK)
                    .zip(min.par_chunks_mut(CHUNK * k / BLOCK)),
            )
            .map(|(wc, (sc, mn))| {
                let four = wc.chunks(BLOCK).all(|b| block_grid(b, 15.0).2);
                let (bits, levels) = if four { (4u32, 15.0) } else { (8, 255.0) };
                let bytes = BLOCK * bits as usize / 8;
                let mut q = vec![0u8; wc.len() / BLOCK * bytes];
                for (((qb, s), m), b) in q
                    .chunks_mut(bytes)
                    .zip(sc.iter_mut())
                    .zip(mn.iter_mut())
                    .zip(wc.chunks(BLOCK))
                {
                    let (bs, lo, _) = block_grid(b, levels);
                    (*s, *m) = (bs, lo);
                    let inv = if bs == 0.0 { 0.0 } else { 1.0 / bs };
                    if bits == 8 {
                        for (o, &x) in qb.iter_mut().zip(b) {
                            *o = level(x, inv, lo, levels);
                        }
                    } else {
                        for t in 0..BLOCK / 2 {
                            qb[t] = level(b[t], inv, lo, levels)
                                | (level(b[t + BLOCK / 2], inv, lo, levels) << 4);
                        }
                    }
                }
                (bits, q)
            })
            .collect();
        let mut chunks = Vec::with_capacity(parts.len());
        let mut q = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
        for (bits, part) in parts {
            chunks.push((bits, q.len()));
            q.extend_from_slice(&part);
        }
        Some(QuantMatrix {
            n,
            k,
            chunks,
            q,
            scale,
            min,
        })
    }

    /// 4 when every row is in 4 bits, else 8.
    pub fn bits(&self) -> u32 {
        self.chunks.iter().map(|c| c.0).max().unwrap_or(4)
    }

    /// Weights stored in 4 bits.
    pub fn weights_in_4_bits(&self) -> usize {
        (0..self.chunks.len())
            .filter(|&c| self.chunks[c].0 == 4)
            .map(|c| self.chunk_rows(c) * self.k)
            .sum()
    }

    fn chunk_rows(&self, c: usize) -> usize {
        CHUNK.min(self.n - c * CHUNK)
    }

    /// Bytes read per pass over the matrix.
    pub fn bytes(&self) -> usize {
        self.q.len() + 4 * (self.scale.len() + self.min.len())
    }

    /// The weights the kernels multiply with, `[n, k]` row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.n * self.k];
        let nb = self.k / BLOCK;
        for (c, oc) in out.chunks_mut(CHUNK * self.k).enumerate() {
            let (bits, codes) = self.chunk_codes(c);
            let bytes = BLOCK * bits as usize / 8;
            for (bc, o) in oc.chunks_exact_mut(BLOCK).enumerate() {
                let bi = c * CHUNK * nb + bc;
                let (s, m) = (self.scale[bi], self.min[bi]);
                for (t, x) in o.iter_mut().enumerate() {
                    *x = (code(bits, &codes[bc * bytes..(bc + 1) * bytes], t) as f32).mul_add(s, m);
                }
            }
        }
        out
    }

    /// Chunk `c`'s width and codes.
    fn chunk_codes(&self, c: usize) -> (u32, &[u8]) {
        let (bits, start) = self.chunks[c];
        let len = self.chunk_rows(c) * self.k * bits as usize / 8;
        (bits, &self.q[start..start + len])
    }

    /// `x [m, k] · selfᵀ → [m, n]` (f32; any m, in passes of 8 rows: meant for decoding).
    pub fn matmul_t(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(&QLinear(self))
    }

    /// `out[j · rows + i] = dot(weight row c·CHUNK + j, x row i)` for the rows of chunk `c`.
    fn chunk_into(&self, c: usize, rows: usize, x: &[f32], out: &mut [f32]) {
        let (bits, codes) = self.chunk_codes(c);
        let nb = self.k / BLOCK;
        let first = c * CHUNK * nb;
        let blocks = first..first + self.chunk_rows(c) * nb;
        let (sc, mn) = (&self.scale[blocks.clone()], &self.min[blocks]);
        assert_eq!(out.len(), self.chunk_rows(c) * rows);
        #[cfg(target_arch = "x86_64")]
        {
            if crate::decode::available() {
                // SAFETY: the CPU has AVX-512F; `kernel_avx512` checks its bounds up front.
                unsafe {
                    match (bits, rows) {
                        (8, 1) => kernel_avx512::<8, 1>(self.k, codes, sc, mn, x, out),
                        (8, 2) => kernel_avx512::<8, 2>(self.k, codes, sc, mn, x, out),
                        (8, 3) => kernel_avx512::<8, 3>(self.k, codes, sc, mn, x, out),
                        (8, 4) => kernel_avx512::<8, 4>(self.k, codes, sc, mn, x, out),
                        (8, 5) => kernel_avx512::<8, 5>(self.k, codes, sc, mn, x, out),
                        (8, 6) => kernel_avx512::<8, 6>(self.k, codes, sc, mn, x, out),
                        (8, 7) => kernel_avx512::<8, 7>(self.k, codes, sc, mn, x, out),
                        (8, _) => kernel_avx512::<8, 8>(self.k, codes, sc, mn, x, out),
                        (_, 1) => kernel_avx512::<4, 1>(self.k, codes, sc, mn, x, out),
                        (_, 2) => kernel_avx512::<4, 2>(self.k, codes, sc, mn, x, out),
                        (_, 3) => kernel_avx512::<4, 3>(self.k, codes, sc, mn, x, out),
                        (_, 4) => kernel_avx512::<4, 4>(self.k, codes, sc, mn, x, out),
                        (_, 5) => kernel_avx512::<4, 5>(self.k, codes, sc, mn, x, out),
                        (_, 6) => kernel_avx512::<4, 6>(self.k, codes, sc, mn, x, out),
                        (_, 7) => kernel_avx512::<4, 7>(self.k, codes, sc, mn, x, out),
                        (_, _) => kernel_avx512::<4, 8>(self.k, codes, sc, mn, x, out),
                    }
                }
                return;
            }
        }
        kernel_scalar(bits, self.k, rows, codes, sc, mn, x, out);
    }
}

/// The portable kernel (and the reference the AVX-512 one is tested against): one chunk's
/// rows, `codes`/`sc`/`mn` starting at its first row.
#[allow(clippy::too_many_arguments)]
fn kernel_scalar(
    bits: u32,
    k: usize,
    rows: usize,
    codes: &[u8],
    sc: &[f32],
    mn: &[f32],
    x: &[f32],
    out: &mut [f32],
) {
    let nb = k / BLOCK;
    let bytes = BLOCK * bits as usize / 8;
    for (j, o) in out.chunks_exact_mut(rows).enumerate() {
        for (i, oi) in o.iter_mut().enumerate() {
            let xr = &x[i * k..(i + 1) * k];
            let mut acc = 0f32;
            for b in 0..nb {
                let bi = j * nb + b;
                let block = &codes[bi * bytes..(bi + 1) * bytes];
                for t in 0..BLOCK {
                    acc +=
                        (code(bits, block, t) as f32).mul_add(sc[bi], mn[bi]) * xr[b * BLOCK + t];
                }
            }
            *oi = acc;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel_avx512<const BITS: u32, const M: usize>(
    k: usize,
    codes: &[u8],
    sc: &[f32],
    mn: &[f32],
    x: &[f32],
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    let nb = k / BLOCK;
    let n = out.len() / M;
    let bytes = BLOCK * BITS as usize / 8;
    assert!(
        x.len() >= M * k
            && codes.len() >= n * nb * bytes
            && sc.len() >= n * nb
            && mn.len() >= n * nb
    );
    let xp = x.as_ptr();
    let nib = _mm512_set1_epi32(15);
    // Two accumulators per x row (the block's two halves) so that even one row has
    // independent FMA chains; with more rows they are independent anyway.
    for j in 0..n {
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let qp = codes.as_ptr().add(j * nb * bytes);
        let (sp, mp) = (sc.as_ptr().add(j * nb), mn.as_ptr().add(j * nb));
        for b in 0..nb {
            let (s, m) = (_mm512_set1_ps(*sp.add(b)), _mm512_set1_ps(*mp.add(b)));
            let (c0, c1) = if BITS == 8 {
                let p = qp.add(b * bytes);
                (
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i)),
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(16) as *const __m128i)),
                )
            } else {
                let v = _mm512_cvtepu8_epi32(_mm_loadu_si128(qp.add(b * bytes) as *const __m128i));
                (_mm512_and_si512(v, nib), _mm512_srli_epi32(v, 4))
            };
            let w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c0), s, m);
            let w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c1), s, m);
            for (i, a) in acc.iter_mut().enumerate() {
                let xb = xp.add(i * k + b * BLOCK);
                a[0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xb), a[0]);
                a[1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb.add(16)), a[1]);
            }
        }
        for (i, a) in acc.iter().enumerate() {
            out[j * M + i] = _mm512_reduce_add_ps(_mm512_add_ps(a[0], a[1]));
        }
    }
}

struct QLinear<'a>(&'a QuantMatrix);

impl CustomOp1 for QLinear<'_> {
    fn name(&self) -> &'static str {
        "prod-quant-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(x) = s else {
            candle_core::bail!("prod-quant-linear: f32 only")
        };
        let Some((xa, xb)) = l.contiguous_offsets() else {
            candle_core::bail!("prod-quant-linear: contiguous input only")
        };
        let (m, k) = l.shape().dims2()?;
        let w = self.0;
        if k != w.k {
            candle_core::bail!("prod-quant-linear: inner dimensions {k} and {} differ", w.k)
        }
        let x = &x[xa..xb];
        let n = w.n;
        let mut y = vec![0f32; m * n];
        let mut yt = vec![0f32; n * ROWS.min(m.max(1))];
        for r0 in (0..m).step_by(ROWS) {
            let rows = ROWS.min(m - r0);
            let xr = &x[r0 * k..(r0 + rows) * k];
            // Handing work to the pool costs more than a small matrix takes on this thread.
            if w.bytes() * rows < PARALLEL_BYTES {
                yt[..n * rows]
                    .chunks_mut(CHUNK * rows)
                    .enumerate()
                    .for_each(|(c, o)| w.chunk_into(c, rows, xr, o));
            } else {
                yt[..n * rows]
                    .par_chunks_mut(CHUNK * rows)
                    .enumerate()
                    .for_each(|(c, o)| w.chunk_into(c, rows, xr, o));
            }
            for j in 0..n {
                for i in 0..rows {
                    y[(r0 + i) * n + j] = yt[j * rows + i];
                }
            }
        }
        Ok((CpuStorage::F32(y), Shape::from((m, n))))
    }
}

/// Quantised copies of a model's projection matrices, by the id of the f32 tensor they copy.
#[derive(Default)]
pub struct QuantizedWeights {
    by_id: HashMap<TensorId, QuantMatrix>,
}

impl QuantizedWeights {
    /// Quantises every 2-D f32 CPU tensor of `weights` whose rows split into blocks.
    pub fn new<'a>(
        weights: impl IntoIterator<Item = &'a Tensor>,
    ) -> candle_core::Result<QuantizedWeights> {
        let mut by_id = HashMap::new();
        for t in weights {
            let Ok((n, k)) = t.dims2() else { continue };
            if !t.device().is_cpu() || t.dtype() != candle_core::DType::F32 {
                continue;
            }
            let q = match with_f32_slice(t, |w| QuantMatrix::quantize(w, n, k)) {
                Some(q) => q,
                None => QuantMatrix::quantize(&t.flatten_all()?.to_vec1()?, n, k),
            };
            if let Some(q) = q {
                by_id.insert(t.id(), q);
            }
        }
        Ok(QuantizedWeights { by_id })
    }

    pub fn get(&self, t: &Tensor) -> Option<&QuantMatrix> {
        self.by_id.get(&t.id())
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// (weights in 4 bits, weights in 8 bits, bytes in all).
    pub fn summary(&self) -> (usize, usize, usize) {
        let four: usize = self.by_id.values().map(|q| q.weights_in_4_bits()).sum();
        let all: usize = self.by_id.values().map(|q| q.n * q.k).sum();
        (
            four,
            all - four,
            self.by_id.values().map(|q| q.bytes()).sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use rand::{Rng, SeedableRng};

    fn max_abs(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    /// General weights go to 8 bits, each within half a step of its block's grid.
    #[test]
    fn eight_bit_error_is_within_half_a_step() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (n, k) = (7, 96);
        let w: Vec<f32> = (0..n * k).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let q = QuantMatrix::quantize(&w, n, k).unwrap();
        assert_eq!(q.bits(), 8);
        let d = q.dequantize();
        for (bw, bd) in w.chunks(BLOCK).zip(d.chunks(BLOCK)) {
            let range = bw.iter().copied().fold(f32::MIN, f32::max)
                - bw.iter().copied().fold(f32::MAX, f32::min);
            assert!(
                max_abs(bw, bd) <= range / 510.0 * 1.001,
                "{} > {}",
                max_abs(bw, bd),
                range / 510.0
            );
        }
    }

    /// Weights on a 16-level grid per block (as dequantised from a Q4 GGUF) are kept in 4 bits
    /// and come back exactly (to rounding); one weight off the grid sends the matrix to 8 bits.
    #[test]
    fn four_bits_only_when_exact() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let (n, k) = (5, 64);
        let mut w = Vec::new();
        for _ in 0..n * k / BLOCK {
            let (d, m): (f32, f32) = (rng.gen_range(0.001..0.1), rng.gen_range(-1.0..0.0));
            let mut codes: Vec<u8> = (0..BLOCK).map(|_| rng.gen_range(0..16)).collect();
            codes[0] = 0;
            codes[1] = 15;
            w.extend(codes.iter().map(|&c| d * c as f32 + m));
        }
        let q = QuantMatrix::quantize(&w, n, k).unwrap();
        assert_eq!(q.bits(), 4);
        assert!(
            max_abs(&w, &q.dequantize()) <= 1e-6,
            "{}",
            max_abs(&w, &q.dequantize())
        );
        assert_eq!(q.bytes(), n * k / 2 + 8 * n * k / BLOCK);
        w[37] += 0.3 * (w[33] - w[32]).abs().max(1e-3);
        assert_eq!(QuantMatrix::quantize(&w, n, k).unwrap().bits(), 8);
    }

    #[test]
    fn unquantisable_shapes_stay_f32() {
        assert!(QuantMatrix::quantize(&[0.0; 40], 2, 20).is_none());
        assert!(QuantMatrix::quantize(&[f32::NAN; 64], 2, 32).is_none());
        let q = QuantMatrix::quantize(&[0.5; 64], 2, 32).unwrap();
        assert_eq!(q.dequantize(), vec![0.5; 64]);
    }

    /// The kernels (AVX-512 where the CPU has it, and the portable one) against a matmul with
    /// the dequantised weights: 8 bits, 4 bits, and both in one matrix (one row off the grid
    /// puts its chunk in 8 bits); row counts around the 8-row pass, weight-row counts around
    /// the chunks.
    #[test]
    fn quantised_linear_equals_the_matmul_of_its_weights() {
        let dev = Device::Cpu;
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for variant in ["8", "4", "mixed"] {
            for &(n, k) in &[(1usize, 32usize), (65, 64), (130, 576), (3, 1536)] {
                let mut w: Vec<f32> = (0..n * k)
                    .map(|i| {
                        if variant == "8" {
                            rng.gen_range(-0.1..0.1)
                        } else {
                            ((i * 7 + i / BLOCK) % 16) as f32 * 0.01 - 0.05
                        }
                    })
                    .collect();
                let off_row = n.min(100) - 1;
                if variant == "mixed" {
                    w[off_row * k + 3] += 0.004;
                }
                let q = QuantMatrix::quantize(&w, n, k).unwrap();
                let four_rows = match variant {
                    "8" => 0,
                    "4" => n,
                    _ => n - CHUNK.min(n - off_row / CHUNK * CHUNK),
                };
                assert_eq!(q.weights_in_4_bits(), four_rows * k, "{variant} n {n}");
                let wd = Tensor::from_vec(q.dequantize(), (n, k), &dev).unwrap();
                for &m in &[1usize, 2, 3, 5, 8, 9, 17] {
                    let x = Tensor::randn(0f32, 1.0, (m, k), &dev).unwrap();
                    let want = x.matmul(&wd.t().unwrap()).unwrap();
                    let got = q.matmul_t(&x).unwrap();
                    assert_eq!(got.dims(), &[m, n]);
                    let tol = 1e-5 * (k as f32).sqrt();
                    let err = (got - &want)
                        .unwrap()
                        .abs()
                        .unwrap()
                        .max_all()
                        .unwrap()
                        .to_scalar::<f32>()
                        .unwrap();
                    assert!(err <= tol, "{variant} m {m} n {n} k {k}: {err}");
                    // The portable kernel, chunk by chunk, on the first rows of x.
                    let xv: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
                    let rows = m.min(ROWS);
                    let wantv: Vec<Vec<f32>> = want.to_vec2().unwrap();
                    for c in 0..n.div_ceil(CHUNK) {
                        let (bits, codes) = q.chunk_codes(c);
                        let nb = k / BLOCK;
                        let blocks = c * CHUNK * nb..(c * CHUNK + q.chunk_rows(c)) * nb;
                        let mut out = vec![0f32; q.chunk_rows(c) * rows];
                        kernel_scalar(
                            bits,
                            k,
                            rows,
                            codes,
                            &q.scale[blocks.clone()],
                            &q.min[blocks],
                            &xv,
                            &mut out,
                        );
                        for j in 0..q.chunk_rows(c) {
                            for i in 0..rows {
                                let d = (out[j * rows + i] - wantv[i][c * CHUNK + j]).abs();
                                assert!(d <= tol, "scalar kernel, {variant}: {d}");
                            }
                        }
                    }
                }
            }
        }
    }
}

//! The projections of decoding: `y = x · Wᵀ` for a few rows of `x` (the samples decoded
//! together) against a large weight matrix. General GEMM kernels are built for many rows and
//! reach a fraction of the machine here (about 60 GFLOP/s at 8 rows against 250 for square
//! products); this kernel reads each weight row once and multiplies it into every row of `x`
//! while that row is in registers. Inference only (no backward): `Llama::linear` uses it when
//! no gradient is wanted.

use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Rows of `x` handled per pass over the weights (accumulators: 8 × 16 lanes).
const ROWS: usize = 8;
/// Lanes per accumulator (one AVX-512 register, two AVX2 ones).
const LANES: usize = 16;
/// Weight rows per parallel task (a few hundred KB of weights).
const CHUNK: usize = 64;

/// Whether the kernel runs on this CPU (AVX-512); otherwise callers use the general matmul.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x [m, k] · w [n, k]ᵀ → [m, n]` (f32, any m; meant for m ≤ 16).
pub fn linear_small(x: &Tensor, w: &Tensor) -> candle_core::Result<Tensor> {
    x.contiguous()?
        .apply_op2_no_bwd(&w.contiguous()?, &SmallLinear)
}

struct SmallLinear;

impl CustomOp2 for SmallLinear {
    fn name(&self) -> &'static str {
        "prod-small-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(x), CpuStorage::F32(w)) = (s1, s2) else {
            candle_core::bail!("prod-small-linear: f32 only")
        };
        let (Some((xa, xb)), Some((wa, wb))) = (l1.contiguous_offsets(), l2.contiguous_offsets())
        else {
            candle_core::bail!("prod-small-linear: contiguous inputs only")
        };
        let (m, k) = l1.shape().dims2()?;
        let (n, k2) = l2.shape().dims2()?;
        if k != k2 {
            candle_core::bail!("prod-small-linear: inner dimensions {k} and {k2} differ")
        }
        let (x, w) = (&x[xa..xb], &w[wa..wb]);
        let mut y = vec![0f32; m * n];
        let mut yt = vec![0f32; n * ROWS];
        for r0 in (0..m).step_by(ROWS) {
            let rows = ROWS.min(m - r0);
            let xr = &x[r0 * k..(r0 + rows) * k];
            yt[..n * rows]
                .par_chunks_mut(CHUNK * rows)
                .zip(w[..n * k].par_chunks(CHUNK * k))
                .for_each(|(out, wc)| {
                    kernel(rows, xr, k, wc, out);
                });
            for j in 0..n {
                for i in 0..rows {
                    y[(r0 + i) * n + j] = yt[j * rows + i];
                }
            }
        }
        Ok((CpuStorage::F32(y), Shape::from((m, n))))
    }
}

/// `out[j * rows + i] = dot(w row j, x row i)` for the weight rows of `w`.
fn kernel(rows: usize, x: &[f32], k: usize, w: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if available() {
            // SAFETY: the CPU has AVX-512F; every slice access below stays inside `x`, `w`
            // and `out` (k-long rows, `rows` rows of x, `out.len() / rows` rows of w).
            unsafe {
                match rows {
                    1 => avx512::<1>(x, k, w, out),
                    2 => avx512::<2>(x, k, w, out),
                    3 => avx512::<3>(x, k, w, out),
                    4 => avx512::<4>(x, k, w, out),
                    5 => avx512::<5>(x, k, w, out),
                    6 => avx512::<6>(x, k, w, out),
                    7 => avx512::<7>(x, k, w, out),
                    _ => avx512::<8>(x, k, w, out),
                }
            }
            return;
        }
    }
    for (wr, o) in w.chunks_exact(k).zip(out.chunks_exact_mut(rows)) {
        for (i, oi) in o.iter_mut().enumerate() {
            *oi = wr
                .iter()
                .zip(&x[i * k..(i + 1) * k])
                .map(|(a, b)| a * b)
                .sum();
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<const M: usize>(x: &[f32], k: usize, w: &[f32], out: &mut [f32]) {
    use std::arch::x86_64::*;
    let n = out.len() / M;
    assert!(x.len() >= M * k && w.len() >= n * k);
    let full = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    // Two weight rows at a time: each load of an x chunk feeds two FMAs (loads, not FMAs,
    // limit this loop).
    let mut j = 0;
    while j + 2 <= n {
        let (w0, w1) = (wp.add(j * k), wp.add((j + 1) * k));
        let mut a0 = [_mm512_setzero_ps(); M];
        let mut a1 = [_mm512_setzero_ps(); M];
        let mut c = 0;
        while c < full {
            let (v0, v1) = (_mm512_loadu_ps(w0.add(c)), _mm512_loadu_ps(w1.add(c)));
            for i in 0..M {
                let xv = _mm512_loadu_ps(xp.add(i * k + c));
                a0[i] = _mm512_fmadd_ps(v0, xv, a0[i]);
                a1[i] = _mm512_fmadd_ps(v1, xv, a1[i]);
            }
            c += LANES;
        }
        for i in 0..M {
            let (mut s0, mut s1) = (_mm512_reduce_add_ps(a0[i]), _mm512_reduce_add_ps(a1[i]));
            for t in full..k {
                s0 += *w0.add(t) * x[i * k + t];
                s1 += *w1.add(t) * x[i * k + t];
            }
            out[j * M + i] = s0;
            out[(j + 1) * M + i] = s1;
        }
        j += 2;
    }
    if j < n {
        let w0 = wp.add(j * k);
        let mut a0 = [_mm512_setzero_ps(); M];
        let mut c = 0;
        while c < full {
            let v0 = _mm512_loadu_ps(w0.add(c));
            for (i, a) in a0.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(v0, _mm512_loadu_ps(xp.add(i * k + c)), *a);
            }
            c += LANES;
        }
        for (i, a) in a0.iter().enumerate() {
            let mut s0 = _mm512_reduce_add_ps(*a);
            for t in full..k {
                s0 += *w0.add(t) * x[i * k + t];
            }
            out[j * M + i] = s0;
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    /// The kernel against candle's matmul: row counts around the 8-row pass, weight-row counts
    /// around the 2-row blocks and the parallel chunks, inner sizes with and without a tail.
    #[test]
    fn small_linear_equals_the_matmul() {
        let dev = Device::Cpu;
        for &m in &[1usize, 2, 3, 4, 7, 8, 9, 16] {
            for &(n, k) in &[(1usize, 16usize), (5, 33), (64, 576), (129, 40), (300, 7)] {
                let x = Tensor::randn(0f32, 1.0, (m, k), &dev).unwrap();
                let w = Tensor::randn(0f32, 1.0, (n, k), &dev).unwrap();
                let want = x.matmul(&w.t().unwrap()).unwrap();
                let got = super::linear_small(&x, &w).unwrap();
                assert_eq!(got.dims(), &[m, n]);
                let err = (got - &want)
                    .unwrap()
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                let scale = want
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
                    .max(1.0);
                assert!(
                    err <= 1e-5 * scale * (k as f32).sqrt(),
                    "m {m} n {n} k {k}: error {err} (scale {scale})"
                );
            }
        }
        // Non-contiguous inputs are made contiguous first.
        let x = Tensor::randn(0f32, 1.0, (24, 8), &dev)
            .unwrap()
            .t()
            .unwrap();
        let w = Tensor::randn(0f32, 1.0, (10, 24), &dev).unwrap();
        let want = x.matmul(&w.t().unwrap()).unwrap();
        let err = (super::linear_small(&x, &w).unwrap() - want)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(err < 1e-4, "{err}");
    }
}

//! The in-place AdamW step, gradient accumulation and the gradient norm's sums of squares.

use super::*;

// ---------------------------------------------------------------------------------------------
// In-place AdamW step and in-place accumulation.

/// One AdamW update of a parameter in place, reading its gradient (times `grad_scale`) and
/// updating the moments `m`, `v`: PyTorch's `AdamW` (bias-corrected moments, decoupled weight
/// decay), with the bias corrections folded into two constants.
pub(crate) struct AdamStep<'a> {
    pub m: Mutex<&'a mut [f32]>,
    pub v: Mutex<&'a mut [f32]>,
    pub b1: f32,
    pub b2: f32,
    pub c1: f32,
    pub c2: f32,
    pub lr: f32,
    pub eps: f32,
    pub decay: f32,
    /// 1 / tokens · clipping factor, folded in here instead of a separate pass (`None`: 1).
    pub grad_scale: Option<f32>,
}

impl InplaceOp2 for AdamStep<'_> {
    fn name(&self) -> &'static str {
        "adamw-step"
    }

    fn cpu_fwd(
        &self,
        dst: &mut CpuStorage,
        dst_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> Result<()> {
        let g = f32_slice(src, src_l, "adamw")?;
        let p = f32_slice_mut(dst, dst_l, "adamw")?;
        let mut m = self
            .m
            .lock()
            .map_err(|_| candle_core::Error::Msg("adamw: poisoned".into()))?;
        let mut v = self
            .v
            .lock()
            .map_err(|_| candle_core::Error::Msg("adamw: poisoned".into()))?;
        let n = g.len();
        if p.len() != n || m.len() != n || v.len() != n {
            bail!("adamw: parameter, gradient and moments differ in size")
        }
        let (pp, mp, vp) = (
            SharedMut(p.as_mut_ptr()),
            SharedMut(m.as_mut_ptr()),
            SharedMut(v.as_mut_ptr()),
        );
        let (b1, b2, decay, eps) = (self.b1, self.b2, self.decay, self.eps);
        // step = (m/c1) / (sqrt(v/c2) + eps) = m·(lr/c1) / (sqrt(v)·(1/sqrt(c2)) + eps): one
        // division and one square root per element instead of three divisions.
        let k1 = self.lr / self.c1;
        let k2 = 1.0 / self.c2.sqrt();
        let scale = self.grad_scale.unwrap_or(1.0);
        par_ranges(n, 1 << 16, |range| {
            // SAFETY: each range is written by exactly one worker.
            let (p, m, v) = unsafe {
                (
                    pp.slice(range.clone()),
                    mp.slice(range.clone()),
                    vp.slice(range.clone()),
                )
            };
            let g = &g[range];
            for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
                let gi = g * scale;
                *m = b1 * *m + (1.0 - b1) * gi;
                *v = b2 * *v + (1.0 - b2) * gi * gi;
                *p = *p * decay - (*m * k1) / (v.sqrt() * k2 + eps);
            }
        });
        Ok(())
    }
}

pub(super) struct AddAssign;

impl InplaceOp2 for AddAssign {
    fn name(&self) -> &'static str {
        "add-assign"
    }

    fn cpu_fwd(
        &self,
        dst: &mut CpuStorage,
        dst_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> Result<()> {
        let g = f32_slice(src, src_l, "add_assign")?;
        let a = f32_slice_mut(dst, dst_l, "add_assign")?;
        if a.len() != g.len() {
            bail!("add_assign: sizes differ")
        }
        for (x, y) in a.iter_mut().zip(g) {
            *x += y;
        }
        Ok(())
    }
}

/// `acc += g` in place (`acc` must own its storage: nothing else may share it).
pub(crate) fn add_assign(acc: &Tensor, g: &Tensor) -> Result<()> {
    acc.inplace_op2(&g.contiguous()?, &AddAssign)
}

/// `Σ x²` of a tensor in f64, without temporaries.
pub(crate) fn sum_squares(t: &Tensor) -> Result<f64> {
    let t = t.contiguous()?;
    let (st, lay) = t.storage_and_layout();
    let s = match &*st {
        candle_core::Storage::Cpu(c) => f32_slice(c, lay, "sum_squares")?,
        _ => bail!("sum_squares: CPU only"),
    };
    Ok(sum_squares_slice(s))
}

/// `Σ x²` in f64 (see [`sum_squares`]).
pub(super) fn sum_squares_slice(s: &[f32]) -> f64 {
    // f32 partial sums over runs of 4,096, f64 across runs, added up in order (the same total
    // whichever thread took which run).
    const RUN: usize = 1 << 12;
    let mut runs = vec![0f64; s.len().div_ceil(RUN)];
    let out = SharedMut(runs.as_mut_ptr());
    par_ranges(runs.len(), 16, |range| {
        for r in range {
            // SAFETY: run `r` is written by the one task that was given it.
            unsafe { out.write(r, sum_squares_run(&s[r * RUN..s.len().min((r + 1) * RUN)])) };
        }
    });
    runs.iter().sum()
}

/// `Σ x²` of a short run in 32 independent f32 lanes: a single running sum is one serial chain
/// of adds that the compiler may not reorder (4% of a training step); separate lanes vectorise.
pub(super) fn sum_squares_run(c: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::decode::available() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { sum_squares_run_avx512(c) };
        }
    }
    sum_squares_run_portable(c)
}

/// [`sum_squares_run_portable`] compiled for AVX-512 (see [`dot_lanes_avx512`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sum_squares_run_avx512(c: &[f32]) -> f64 {
    sum_squares_run_portable(c)
}

#[inline(always)]
pub(super) fn sum_squares_run_portable(c: &[f32]) -> f64 {
    const LANES: usize = 32;
    let mut acc = [0f32; LANES];
    let mut runs = c.chunks_exact(LANES);
    for r in &mut runs {
        for (a, &v) in acc.iter_mut().zip(r) {
            *a += v * v;
        }
    }
    let tail: f64 = runs.remainder().iter().map(|&v| (v * v) as f64).sum();
    acc.iter().map(|&a| a as f64).sum::<f64>() + tail
}

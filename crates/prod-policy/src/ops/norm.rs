//! RMSNorm, and the short sums it and the attention backward use.

use super::*;

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = x / sqrt(mean(x²) + eps) ⊙ w, over the last dimension.

pub(super) struct RmsNorm {
    eps: f32,
}

/// `Σ a[i]·b[i]` in 16 independent f32 lanes (a single running sum is a serial chain of adds
/// that the compiler may not reorder; separate lanes vectorise).
pub(super) fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::decode::available() {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { dot_lanes_avx512(a, b) };
        }
    }
    dot_lanes_portable(a, b)
}

/// [`dot_lanes_portable`] compiled for AVX-512 (one 16-lane register per step instead of four
/// SSE ones): these short sums run on data still in cache, where the instruction count shows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn dot_lanes_avx512(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes_portable(a, b)
}

#[inline(always)]
pub(super) fn dot_lanes_portable(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

pub(super) fn rms_inv(row: &[f32], eps: f32) -> f32 {
    1.0 / (dot_lanes(row, row) / row.len() as f32 + eps).sqrt()
}

/// Rows per task of the norm's backward (each task keeps its own partial `dw`).
pub(super) const RMS_ROWS: usize = 16;

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "fused-rms-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "rms_norm")?;
        let w = f32_slice(s2, l2, "rms_norm")?;
        if l1.dims().last() != Some(&w.len()) {
            bail!(
                "rms_norm: last dimension of {:?} is not the weight's {}",
                l1.dims(),
                w.len()
            )
        }
        Ok((
            CpuStorage::F32(rms_forward(x, w, self.eps)?),
            l1.shape().clone(),
        ))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (x, w, g) = (x.contiguous()?, w.contiguous()?, g.contiguous()?);
        let (dx, dw) = with_slices(&[x.clone(), w.clone(), g], "rms_norm", |s| {
            rms_backward(s[0], s[1], s[2], self.eps)
        })?;
        let dx = Tensor::from_vec(dx, x.shape(), x.device())?;
        let dw = Tensor::from_vec(dw, w.shape(), w.device())?;
        Ok((Some(dx), Some(dw)))
    }
}

/// RMSNorm of the rows of `x` (`w.len()` wide) scaled by `w`.
pub(super) fn rms_forward(x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>> {
    let d = w.len();
    if d == 0 || !x.len().is_multiple_of(d) {
        bail!(
            "rms_norm: {} values are not rows of the weight's {d}",
            x.len()
        )
    }
    // Not zeroed first (a serial pass before the parallel one): every element is written below.
    let mut y = Vec::with_capacity(x.len());
    let out = SharedMut(y.as_mut_ptr());
    par_ranges(x.len() / d, 64, |rows| {
        // SAFETY: each range of rows is written by exactly one worker, within y's capacity.
        let yr = unsafe { out.uninit(rows.start * d..rows.end * d) };
        for (xr, yr) in x[rows.start * d..rows.end * d]
            .chunks_exact(d)
            .zip(yr.chunks_exact_mut(d))
        {
            let r = rms_inv(xr, eps);
            for ((yv, xv), wv) in yr.iter_mut().zip(xr).zip(w) {
                yv.write(xv * r * wv);
            }
        }
    });
    // SAFETY: the row ranges cover every row (x.len() is a multiple of d), all written above.
    unsafe { y.set_len(x.len()) };
    Ok(y)
}

/// Gradients `(dx, dw)` of [`rms_forward`] for the output gradient `g`.
///
/// With x̂ = x·r, y = x̂ ⊙ w:  dw = Σ_rows g ⊙ x̂;  dx = r · (g⊙w − x̂ · mean(g⊙w⊙x̂)).
pub(super) fn rms_backward(
    xs: &[f32],
    ws: &[f32],
    gs: &[f32],
    eps: f32,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let d = ws.len();
    if d == 0 || !xs.len().is_multiple_of(d) || gs.len() != xs.len() {
        bail!(
            "rms_norm backward: x of {} and g of {} for a weight of {d}",
            xs.len(),
            gs.len()
        )
    }
    let rows = xs.len() / d;
    let tasks = rows.div_ceil(RMS_ROWS);
    // dx not zeroed first (a serial pass before the parallel one): every row is written below.
    let mut dx: Vec<f32> = Vec::with_capacity(xs.len());
    let mut partial = vec![0f32; tasks * d];
    let (pdx, pdw) = (SharedMut(dx.as_mut_ptr()), SharedMut(partial.as_mut_ptr()));
    par_ranges(tasks, 2, |range| {
        for task in range {
            let r0 = task * RMS_ROWS;
            let r1 = rows.min(r0 + RMS_ROWS);
            // SAFETY: task `task` alone writes rows r0..r1 of dx (within its capacity) and its
            // own row of `partial`.
            let (dxt, dw) = unsafe {
                (
                    pdx.uninit(r0 * d..r1 * d),
                    pdw.slice(task * d..(task + 1) * d),
                )
            };
            let span = r0 * d..r1 * d;
            for ((xr, gr), dxr) in xs[span.clone()]
                .chunks_exact(d)
                .zip(gs[span].chunks_exact(d))
                .zip(dxt.chunks_exact_mut(d))
            {
                let r = rms_inv(xr, eps);
                // Σ g·w·x̂ = r · Σ (g·w)·x; dxr holds g·w until the last line.
                for ((o, &gv), &wv) in dxr.iter_mut().zip(gr).zip(ws) {
                    o.write(gv * wv);
                }
                // SAFETY: every element of the row was written just above.
                let dxr =
                    unsafe { std::slice::from_raw_parts_mut(dxr.as_mut_ptr().cast::<f32>(), d) };
                let mean = r * dot_lanes(dxr, xr) / d as f32;
                for (((o, &xv), &gv), dwv) in dxr.iter_mut().zip(xr).zip(gr).zip(dw.iter_mut()) {
                    let xh = xv * r;
                    *dwv += gv * xh;
                    *o = r * (*o - xh * mean);
                }
            }
        }
    });
    // SAFETY: the tasks cover rows 0..rows (xs.len() = rows·d), each row written above.
    unsafe { dx.set_len(xs.len()) };
    let mut dw = vec![0f32; d];
    for p in partial.chunks_exact(d) {
        for (a, &b) in dw.iter_mut().zip(p) {
            *a += b;
        }
    }
    Ok((dx, dw))
}

/// RMSNorm of `x` (any rank, normalised over the last dimension) scaled by `w` `[d]`.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    ensure_cpu_f32(x, "rms_norm")?;
    x.contiguous()?.apply_op2(&w.contiguous()?, RmsNorm { eps })
}

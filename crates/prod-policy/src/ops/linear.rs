//! The fused linear op (`x·wᵀ` through gemm, weight gradients into slots), the gemm the
//! training pass splits over its pool, and the products the block ops share.

use super::*;
use crate::packing::{packing, set_packing, DEFAULT_PACKING, TRAINING_PACKING};

// ---------------------------------------------------------------------------------------------
// Linear: y = x · wᵀ with w in Hugging Face's [out, in] layout.

pub(super) struct Linear {
    /// Where the weight's gradient goes, accumulated in place (see [`GradSlot`]); `None`: the
    /// gradient is returned to candle's autograd like any other.
    sink: Option<std::sync::Arc<GradSlot>>,
}

/// A parameter's gradient, accumulated in place by the ops that use the parameter instead of
/// being returned to candle's autograd — which would allocate a zero tensor and a fresh sum for
/// it (two extra passes over every weight per step). Summed over every use and micro-batch.
pub(crate) struct GradSlot {
    pub len: usize,
    pub buf: Mutex<Option<Vec<f32>>>,
    /// `Σ g²` of `buf` as the last write left it, when that write was a product
    /// ([`add_weight_grad`] sums it right after, while the gradient is still in cache, which
    /// spares the gradient norm a pass over every weight from memory) or an embedding lookup
    /// into a slot whose sum was kept (it updates the sum over the rows it wrote); `None` after
    /// any other write.
    squares: Mutex<Option<f64>>,
}

impl GradSlot {
    pub fn new(len: usize) -> std::sync::Arc<GradSlot> {
        std::sync::Arc::new(GradSlot {
            len,
            buf: Mutex::new(None),
            squares: Mutex::new(None),
        })
    }

    pub(super) fn set_squares(&self, v: Option<f64>) -> Result<()> {
        *self
            .squares
            .lock()
            .map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))? = v;
        Ok(())
    }

    /// `Σ g²` of the gradient [`GradSlot::take`] returns, if the last write computed it.
    pub fn take_squares(&self) -> Result<Option<f64>> {
        Ok(self
            .squares
            .lock()
            .map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))?
            .take())
    }

    pub(super) fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Vec<f32>>>> {
        self.buf
            .lock()
            .map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))
    }

    /// The accumulated gradient, if any op wrote one.
    pub fn take(&self) -> Result<Option<Vec<f32>>> {
        Ok(self.lock()?.take())
    }
}

/// `dst (+)= lhs · rhs` with explicit strides (`accumulate`: add to `dst`, else overwrite it);
/// `dst` is row-major with row stride `dst_rs`.
///
/// # Safety
/// The strides must describe in-bounds `[m, k]`, `[k, n]` and `[m, n]` matrices of the pointers.
// Long only in lines: its three calls of `gemm_f32_on` take gemm's thirteen arguments one per
// line; the logic is one choice (split over the spin pool, or one rayon-parallel product).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_f32(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: isize,
    accumulate: bool,
    lhs: *const f32,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const f32,
    rhs_cs: isize,
    rhs_rs: isize,
) {
    if crate::pool::active() && m * n * k >= 1 << 20 {
        // Training: split the product's longer side over the spin pool, each part one
        // single-threaded gemm (see `pool`: rayon's wake-ups cost more than these products).
        let pool = crate::pool::pool();
        let split_rows = m >= n;
        let len = if split_rows { m } else { n };
        let chunk = len.div_ceil(pool.parts()).next_multiple_of(16);
        let (dst, lhs, rhs) = (dst as usize, lhs as usize, rhs as usize);
        pool.execute(|part| {
            let a = part * chunk;
            if a >= len {
                return;
            }
            let b = len.min(a + chunk);
            let (dst, lhs, rhs) = (dst as *mut f32, lhs as *const f32, rhs as *const f32);
            // SAFETY: parts cover disjoint rows (or columns) of dst, within the caller's
            // bounds; lhs and rhs are only read.
            unsafe {
                if split_rows {
                    let (d, l) = (
                        dst.offset(a as isize * dst_rs),
                        lhs.offset(a as isize * lhs_rs),
                    );
                    gemm_f32_on(
                        gemm::Parallelism::None,
                        b - a,
                        n,
                        k,
                        d,
                        dst_rs,
                        accumulate,
                        l,
                        lhs_cs,
                        lhs_rs,
                        rhs,
                        rhs_cs,
                        rhs_rs,
                    )
                } else {
                    let (d, r) = (dst.add(a), rhs.offset(a as isize * rhs_cs));
                    gemm_f32_on(
                        gemm::Parallelism::None,
                        m,
                        b - a,
                        k,
                        d,
                        dst_rs,
                        accumulate,
                        lhs,
                        lhs_cs,
                        lhs_rs,
                        r,
                        rhs_cs,
                        rhs_rs,
                    )
                }
            }
        });
        return;
    }
    let threads = candle_core::utils::get_num_threads();
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    gemm_f32_on(
        parallelism,
        m,
        n,
        k,
        dst,
        dst_rs,
        accumulate,
        lhs,
        lhs_cs,
        lhs_rs,
        rhs,
        rhs_cs,
        rhs_rs,
    )
}

/// [`gemm_f32`]'s product with the given `parallelism` (`None`: on this thread only, for
/// callers that split the work themselves): gemm computes `dst = alpha·dst + beta·lhs·rhs`
/// (dst read only when `accumulate`).
///
/// # Safety
/// As [`gemm_f32`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_f32_on(
    parallelism: gemm::Parallelism,
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    dst_rs: isize,
    accumulate: bool,
    lhs: *const f32,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const f32,
    rhs_cs: isize,
    rhs_rs: isize,
) {
    let alpha = if accumulate { 1f32 } else { 0f32 };
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs,
        accumulate,
        lhs,
        lhs_cs,
        lhs_rs,
        rhs,
        rhs_cs,
        rhs_rs,
        alpha,
        1f32,
        false,
        false,
        false,
        parallelism,
    )
}

/// This machine's f32 matrix-product rate in GFLOP/s: an `n`×`n`×`n` product, best of `reps`, run
/// both on rayon (as candle's matmul and sampling run it) and on the training pass's spin pool,
/// each with gemm's default packing and with the training pass's; the highest rate of the four,
/// so that a limit derived from it is the strictest one.
pub fn measured_gemm_gflops(n: usize, reps: usize) -> f64 {
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 1009.0)
        .collect();
    let mut c = vec![0f32; n * n];
    let mut best = f64::MAX;
    // Started first: its start sets the training packing, which is restored below.
    crate::pool::pool();
    let before = packing();
    for setting in [DEFAULT_PACKING, TRAINING_PACKING] {
        set_packing(setting);
        for on_pool in [false, true] {
            for _ in 0..reps.max(1) {
                let t = std::time::Instant::now();
                let dst = c.as_mut_ptr();
                let run = || {
                    // SAFETY: a and c are n×n row-major.
                    unsafe {
                        gemm_f32(
                            n,
                            n,
                            n,
                            dst,
                            n as isize,
                            false,
                            a.as_ptr(),
                            1,
                            n as isize,
                            a.as_ptr(),
                            1,
                            n as isize,
                        )
                    }
                };
                if on_pool {
                    crate::pool::training(run)
                } else {
                    run()
                }
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
    }
    set_packing(before);
    std::hint::black_box(&c);
    2.0 * (n as f64).powi(3) / best / 1e9
}

/// `x · wᵀ` (`x` `[n, k]`, `w` `[m, k]`, row-major) into a new `[n, m]` buffer; with `add`, the
/// buffer starts as a copy of `add` (`[n, m]`) and the product is added to it.
pub(super) fn matmul_wt(
    x: &[f32],
    w: &[f32],
    n: usize,
    k: usize,
    m: usize,
    add: Option<&[f32]>,
) -> Vec<f32> {
    debug_assert!(x.len() == n * k && w.len() == m * k);
    match add {
        Some(a) => {
            let mut y = a.to_vec();
            // SAFETY: x is [n, k], wᵀ is [k, m] (column j = row j of w), y is [n, m].
            unsafe {
                gemm_f32(
                    n,
                    m,
                    k,
                    y.as_mut_ptr(),
                    m as isize,
                    true,
                    x.as_ptr(),
                    1,
                    k as isize,
                    w.as_ptr(),
                    k as isize,
                    1,
                )
            };
            y
        }
        None => {
            let mut y = Vec::with_capacity(n * m);
            // SAFETY: as above, y within its capacity; without `accumulate` gemm writes every
            // element before set_len.
            unsafe {
                gemm_f32(
                    n,
                    m,
                    k,
                    y.as_mut_ptr(),
                    m as isize,
                    false,
                    x.as_ptr(),
                    1,
                    k as isize,
                    w.as_ptr(),
                    k as isize,
                    1,
                );
                y.set_len(n * m);
            }
            y
        }
    }
}

/// `dst (+)= g · w` (`g` `[n, m]`, `w` `[m, k]`, `dst` `[n, k]`; `accumulate`: add to `dst`).
pub(super) fn matmul_w_into(
    g: &[f32],
    w: &[f32],
    n: usize,
    m: usize,
    k: usize,
    dst: &mut Vec<f32>,
    accumulate: bool,
) {
    debug_assert!(g.len() == n * m && w.len() == m * k && (!accumulate || dst.len() == n * k));
    if !accumulate {
        dst.clear();
        dst.reserve(n * k);
    }
    // SAFETY: g is [n, m], w is [m, k], dst is [n, k] within its capacity, all row-major;
    // without `accumulate` gemm writes every element before set_len.
    unsafe {
        gemm_f32(
            n,
            k,
            m,
            dst.as_mut_ptr(),
            k as isize,
            accumulate,
            g.as_ptr(),
            1,
            m as isize,
            w.as_ptr(),
            1,
            k as isize,
        );
        dst.set_len(n * k);
    }
}

/// A weight's gradient `gᵀ · x` (`g` `[n, m]`, `x` `[n, k]`) added to its slot (`[m, k]`).
pub(super) fn add_weight_grad(
    sink: &GradSlot,
    g: &[f32],
    x: &[f32],
    n: usize,
    m: usize,
    k: usize,
) -> Result<()> {
    if sink.len != m * k || g.len() != n * m || x.len() != n * k {
        bail!(
            "linear: gradient slot of {} for a [{m}, {k}] weight",
            sink.len
        )
    }
    let mut slot = sink.lock()?;
    let accumulate = slot.is_some();
    let buf = slot.get_or_insert_with(|| Vec::with_capacity(m * k));
    // SAFETY: gᵀ is [m, n] (element (i, j) = g[j·m + i]), x is [n, k], dst is [m, k] within the
    // buffer's capacity; without `accumulate` gemm writes every element before set_len.
    unsafe {
        gemm_f32(
            m,
            k,
            n,
            buf.as_mut_ptr(),
            k as isize,
            accumulate,
            g.as_ptr(),
            m as isize,
            1,
            x.as_ptr(),
            1,
            k as isize,
        );
        buf.set_len(m * k);
    }
    sink.set_squares(Some(sum_squares_slice(buf)))
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "fused-linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "linear")?;
        let w = f32_slice(s2, l2, "linear")?;
        let (n, k) = l1.shape().dims2()?;
        let (m, k2) = l2.shape().dims2()?;
        if k != k2 {
            bail!("linear: x is [{n}, {k}] but w is [{m}, {k2}]")
        }
        // Not zeroed first: gemm overwrites every element (a zeroing pass was 2% of a step).
        Ok((
            CpuStorage::F32(matmul_wt(x, w, n, k, m, None)),
            Shape::from((n, m)),
        ))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        // dx = g · w ; dw = gᵀ · x, both already in their argument's layout (no transpose pass).
        let (x, w) = (x.detach(), w.detach());
        let Some(sink) = &self.sink else {
            return Ok((Some(g.matmul(&w)?), Some(g.t()?.matmul(&x)?)));
        };
        let (n, m) = g.dims2()?;
        let k = x.dim(1)?;
        if sink.len != m * k || w.dims2()? != (m, k) {
            bail!(
                "linear: gradient slot of {} for a [{m}, {k}] weight",
                sink.len
            )
        }
        let (g, x, w) = (g.contiguous()?, x.contiguous()?, w.contiguous()?);
        let dx = with_slices(&[g.clone(), x, w], "linear", |s| {
            // dx = g · w straight into an unzeroed buffer (candle's matmul zeroes its output).
            let mut dx = Vec::new();
            matmul_w_into(s[0], s[2], n, m, k, &mut dx, false);
            add_weight_grad(sink, s[0], s[1], n, m, k)?;
            Ok(dx)
        })?;
        Ok((Some(Tensor::from_vec(dx, (n, k), g.device())?), None))
    }
}

/// `x · wᵀ` for `x` `[n, in]` and `w` `[out, in]`.
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    ensure_cpu_f32(x, "linear")?;
    x.contiguous()?
        .apply_op2(&w.contiguous()?, Linear { sink: None })
}

/// [`linear`] whose weight gradient is accumulated into `sink` instead of candle's autograd.
pub(crate) fn linear_sink(
    x: &Tensor,
    w: &Tensor,
    sink: Option<std::sync::Arc<GradSlot>>,
) -> Result<Tensor> {
    ensure_cpu_f32(x, "linear")?;
    x.contiguous()?.apply_op2(&w.contiguous()?, Linear { sink })
}

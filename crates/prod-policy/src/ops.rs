//! Fused CPU ops with hand-written backward passes, for training.
//!
//! Why: candle's autograd allocates a zero tensor and then a fresh sum for every gradient that
//! reaches every node (`GradStore::or_insert` + `add`), so a composite op such as
//! `rms_norm_slow` or `log_softmax` costs several full-size temporaries forward and twice as
//! many backward; a transposed weight (`x.matmul(&w.t())`) adds a strided accumulation of the
//! whole weight. Each op here is one graph node (`CustomOp1/2`, whose `bwd` candle records), so
//! it costs one output forward and one gradient per input backward.
//!
//! Every op is checked against the composite candle version it replaces, forward and
//! gradient, in `tests.rs` (`fused_*` tests). All ops are f32 and CPU-only; on another device or
//! dtype they return an error (the model falls back to the composite ops there).

use std::ops::Range;
use std::sync::Mutex;

use candle_core::{
    bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, InplaceOp2, Layout, Result, Shape, Tensor,
};

/// The contiguous f32 data of an op argument.
fn f32_slice<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<&'a [f32]> {
    let Some((start, end)) = l.contiguous_offsets() else {
        bail!("{op}: argument must be contiguous")
    };
    match s {
        CpuStorage::F32(v) => Ok(&v[start..end]),
        _ => bail!("{op}: only f32 is supported"),
    }
}

/// The contiguous f32 data of an in-place op's destination.
fn f32_slice_mut<'a>(s: &'a mut CpuStorage, l: &Layout, op: &str) -> Result<&'a mut [f32]> {
    let Some((start, end)) = l.contiguous_offsets() else {
        bail!("{op}: destination must be contiguous")
    };
    match s {
        CpuStorage::F32(v) => Ok(&mut v[start..end]),
        _ => bail!("{op}: only f32 is supported"),
    }
}

/// A raw pointer that worker threads may write through, each to its own disjoint range.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    /// # Safety
    /// `range` must be in bounds and no other thread may touch it concurrently.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, range: Range<usize>) -> &mut [f32] {
        std::slice::from_raw_parts_mut(self.0.add(range.start), range.len())
    }
}

/// Runs `f` over `0..n` split into ranges on rayon's global pool — the threads gemm already
/// uses, so no extra threads compete on a 2-core machine — when there is enough work to pay
/// for the hand-off.
fn par_ranges(n: usize, min_parallel: usize, f: impl Fn(Range<usize>) + Sync) {
    use rayon::prelude::*;
    if n >= min_parallel && crate::pool::active() {
        return crate::pool::for_ranges(n, &f);
    }
    let threads = rayon::current_num_threads();
    if n < min_parallel || threads < 2 {
        return f(0..n);
    }
    let chunk = n.div_ceil(threads * 4).max(1);
    (0..n.div_ceil(chunk)).into_par_iter().for_each(|c| f(c * chunk..n.min((c + 1) * chunk)));
}

fn ensure_cpu_f32(t: &Tensor, op: &str) -> Result<()> {
    if !t.device().is_cpu() || t.dtype() != DType::F32 {
        bail!("{op}: fused ops are f32 on the CPU only")
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Linear: y = x · wᵀ with w in Hugging Face's [out, in] layout.

struct Linear {
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
    /// spares the gradient norm a pass over every weight from memory); `None` after any other
    /// write.
    squares: Mutex<Option<f64>>,
}

impl GradSlot {
    pub fn new(len: usize) -> std::sync::Arc<GradSlot> {
        std::sync::Arc::new(GradSlot { len, buf: Mutex::new(None), squares: Mutex::new(None) })
    }

    fn set_squares(&self, v: Option<f64>) -> Result<()> {
        *self.squares.lock().map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))? = v;
        Ok(())
    }

    /// `Σ g²` of the gradient [`GradSlot::take`] returns, if the last write computed it.
    pub fn take_squares(&self) -> Result<Option<f64>> {
        Ok(self.squares.lock().map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))?.take())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Vec<f32>>>> {
        self.buf.lock().map_err(|_| candle_core::Error::Msg("gradient slot: poisoned".into()))
    }

    /// The accumulated gradient, if any op wrote one.
    pub fn take(&self) -> Result<Option<Vec<f32>>> {
        Ok(self.lock()?.take())
    }
}

/// `dst (+)= lhs · rhs` with explicit strides (`accumulate`: add to `dst`, else overwrite it).
///
/// # Safety
/// The strides must describe in-bounds `[m, k]`, `[k, n]` and `[m, n]` matrices of the pointers.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_f32(
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
    let (alpha, beta) = (if accumulate { 1f32 } else { 0f32 }, 1f32);
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
                    let (d, l) = (dst.offset(a as isize * dst_rs), lhs.offset(a as isize * lhs_rs));
                    gemm::gemm(b - a, n, k, d, 1, dst_rs, accumulate, l, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs, alpha, beta, false, false, false, gemm::Parallelism::None)
                } else {
                    let (d, r) = (dst.add(a), rhs.offset(a as isize * rhs_cs));
                    gemm::gemm(m, b - a, k, d, 1, dst_rs, accumulate, lhs, lhs_cs, lhs_rs, r, rhs_cs, rhs_rs, alpha, beta, false, false, false, gemm::Parallelism::None)
                }
            }
        });
        return;
    }
    let threads = candle_core::utils::get_num_threads();
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    // gemm computes dst = alpha·dst + beta·lhs·rhs (dst read only when `accumulate`).
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
        if accumulate { 1f32 } else { 0f32 },
        1f32,
        false,
        false,
        false,
        parallelism,
    )
}

/// This machine's f32 matrix-product rate in GFLOP/s: an `n`×`n`×`n` product, best of `reps`, run
/// both on rayon (as candle's matmul and sampling run it) and on the training pass's spin pool;
/// the higher rate of the two, so that a limit derived from it is the stricter one.
pub fn measured_gemm_gflops(n: usize, reps: usize) -> f64 {
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7919 % 1009) as f32 - 504.0) / 1009.0).collect();
    let mut c = vec![0f32; n * n];
    let mut best = f64::MAX;
    for on_pool in [false, true] {
        for _ in 0..reps.max(1) {
            let t = std::time::Instant::now();
            let dst = c.as_mut_ptr();
            let run = || {
                // SAFETY: a and c are n×n row-major.
                unsafe { gemm_f32(n, n, n, dst, n as isize, false, a.as_ptr(), 1, n as isize, a.as_ptr(), 1, n as isize) }
            };
            if on_pool {
                crate::pool::training(run)
            } else {
                run()
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    std::hint::black_box(&c);
    2.0 * (n as f64).powi(3) / best / 1e9
}

/// `x · wᵀ` (`x` `[n, k]`, `w` `[m, k]`, row-major) into a new `[n, m]` buffer; with `add`, the
/// buffer starts as a copy of `add` (`[n, m]`) and the product is added to it.
fn matmul_wt(x: &[f32], w: &[f32], n: usize, k: usize, m: usize, add: Option<&[f32]>) -> Vec<f32> {
    debug_assert!(x.len() == n * k && w.len() == m * k);
    match add {
        Some(a) => {
            let mut y = a.to_vec();
            // SAFETY: x is [n, k], wᵀ is [k, m] (column j = row j of w), y is [n, m].
            unsafe { gemm_f32(n, m, k, y.as_mut_ptr(), m as isize, true, x.as_ptr(), 1, k as isize, w.as_ptr(), k as isize, 1) };
            y
        }
        None => {
            let mut y = Vec::with_capacity(n * m);
            // SAFETY: as above, y within its capacity; without `accumulate` gemm writes every
            // element before set_len.
            unsafe {
                gemm_f32(n, m, k, y.as_mut_ptr(), m as isize, false, x.as_ptr(), 1, k as isize, w.as_ptr(), k as isize, 1);
                y.set_len(n * m);
            }
            y
        }
    }
}

/// `dst (+)= g · w` (`g` `[n, m]`, `w` `[m, k]`, `dst` `[n, k]`; `accumulate`: add to `dst`).
fn matmul_w_into(g: &[f32], w: &[f32], n: usize, m: usize, k: usize, dst: &mut Vec<f32>, accumulate: bool) {
    debug_assert!(g.len() == n * m && w.len() == m * k && (!accumulate || dst.len() == n * k));
    if !accumulate {
        dst.clear();
        dst.reserve(n * k);
    }
    // SAFETY: g is [n, m], w is [m, k], dst is [n, k] within its capacity, all row-major;
    // without `accumulate` gemm writes every element before set_len.
    unsafe {
        gemm_f32(n, k, m, dst.as_mut_ptr(), k as isize, accumulate, g.as_ptr(), 1, m as isize, w.as_ptr(), 1, k as isize);
        dst.set_len(n * k);
    }
}

/// A weight's gradient `gᵀ · x` (`g` `[n, m]`, `x` `[n, k]`) added to its slot (`[m, k]`).
fn add_weight_grad(sink: &GradSlot, g: &[f32], x: &[f32], n: usize, m: usize, k: usize) -> Result<()> {
    if sink.len != m * k || g.len() != n * m || x.len() != n * k {
        bail!("linear: gradient slot of {} for a [{m}, {k}] weight", sink.len)
    }
    let mut slot = sink.lock()?;
    let accumulate = slot.is_some();
    let buf = slot.get_or_insert_with(|| Vec::with_capacity(m * k));
    // SAFETY: gᵀ is [m, n] (element (i, j) = g[j·m + i]), x is [n, k], dst is [m, k] within the
    // buffer's capacity; without `accumulate` gemm writes every element before set_len.
    unsafe {
        gemm_f32(m, k, n, buf.as_mut_ptr(), k as isize, accumulate, g.as_ptr(), m as isize, 1, x.as_ptr(), 1, k as isize);
        buf.set_len(m * k);
    }
    sink.set_squares(Some(sum_squares_slice(buf)))
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "fused-linear"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "linear")?;
        let w = f32_slice(s2, l2, "linear")?;
        let (n, k) = l1.shape().dims2()?;
        let (m, k2) = l2.shape().dims2()?;
        if k != k2 {
            bail!("linear: x is [{n}, {k}] but w is [{m}, {k2}]")
        }
        // Not zeroed first: gemm overwrites every element (a zeroing pass was 2% of a step).
        Ok((CpuStorage::F32(matmul_wt(x, w, n, k, m, None)), Shape::from((n, m))))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        // dx = g · w ; dw = gᵀ · x, both already in their argument's layout (no transpose pass).
        let (x, w) = (x.detach(), w.detach());
        let Some(sink) = &self.sink else { return Ok((Some(g.matmul(&w)?), Some(g.t()?.matmul(&x)?))) };
        let (n, m) = g.dims2()?;
        let k = x.dim(1)?;
        if sink.len != m * k || w.dims2()? != (m, k) {
            bail!("linear: gradient slot of {} for a [{m}, {k}] weight", sink.len)
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
    x.contiguous()?.apply_op2(&w.contiguous()?, Linear { sink: None })
}

/// [`linear`] whose weight gradient is accumulated into `sink` instead of candle's autograd.
pub(crate) fn linear_sink(x: &Tensor, w: &Tensor, sink: Option<std::sync::Arc<GradSlot>>) -> Result<Tensor> {
    ensure_cpu_f32(x, "linear")?;
    x.contiguous()?.apply_op2(&w.contiguous()?, Linear { sink })
}

// ---------------------------------------------------------------------------------------------
// Batched matmul for attention (`q·kᵀ`, `p·v`), strided operands, products on the spin pool.

/// A `[.., rows, cols]` operand: the f32 storage from its offset, and (batches, batch stride,
/// row stride, column stride), when its leading dimensions collapse into one batch stride.
struct Strided<'a> {
    data: &'a [f32],
    batches: usize,
    bs: isize,
    rs: isize,
    cs: isize,
    rows: usize,
    cols: usize,
}

impl<'a> Strided<'a> {
    fn new(s: &'a CpuStorage, l: &Layout, op: &str) -> Result<Strided<'a>> {
        let CpuStorage::F32(v) = s else { bail!("{op}: only f32 is supported") };
        let (dims, st) = (l.dims(), l.stride());
        let n = dims.len();
        if n < 2 {
            bail!("{op}: operands need at least two dimensions, got {dims:?}")
        }
        let mut bs = 0usize;
        let mut next: Option<usize> = None;
        for i in (0..n - 2).rev() {
            if dims[i] == 1 {
                continue;
            }
            match next {
                None => bs = st[i],
                Some(e) if st[i] == e => {}
                Some(_) => bail!("{op}: batch dimensions {dims:?} with strides {st:?} do not collapse"),
            }
            next = Some(st[i] * dims[i]);
        }
        // The farthest element must lie in the storage (candle's layouts guarantee it; checked
        // because the products below read through raw pointers).
        let last: usize = dims.iter().zip(st).map(|(&d, &s)| d.saturating_sub(1) * s).sum();
        let data = &v[l.start_offset()..];
        if dims.iter().all(|&d| d > 0) && last >= data.len() {
            bail!("{op}: layout {dims:?}/{st:?} reaches past its storage")
        }
        Ok(Strided {
            data,
            batches: dims[..n - 2].iter().product(),
            bs: bs as isize,
            rs: st[n - 2] as isize,
            cs: st[n - 1] as isize,
            rows: dims[n - 2],
            cols: dims[n - 1],
        })
    }

    /// The same operand transposed (a view: strides swapped).
    fn t(&self) -> Strided<'a> {
        Strided { rs: self.cs, cs: self.rs, rows: self.cols, cols: self.rows, ..*self }
    }
}

/// `out[i] = a[i] · b[i]` for every batch `i` (out contiguous `[batches, a.rows, b.cols]`).
fn bmm_into(a: &Strided, b: &Strided, op: &str) -> Result<Vec<f32>> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || a.batches != b.batches {
        bail!("{op}: [{}, {m}, {k}] · [{}, {}, {n}]", a.batches, b.batches, b.rows)
    }
    let batches = a.batches;
    let mut out: Vec<f32> = Vec::with_capacity(batches * m * n);
    if k == 0 {
        out.resize(batches * m * n, 0.0);
        return Ok(out);
    }
    let (o, ap, bp) = (out.as_mut_ptr() as usize, a.data.as_ptr() as usize, b.data.as_ptr() as usize);
    // Rows `r` of batch `i`: one single-threaded gemm.
    let rows = |i: usize, r: Range<usize>| {
        let (o, ap, bp) = (o as *mut f32, ap as *const f32, bp as *const f32);
        // SAFETY: `Strided::new` checked both operands' extents; each call writes rows `r` of
        // batch `i` of `out` (capacity batches·m·n), disjoint from every other call's.
        unsafe {
            gemm::gemm(
                r.len(), n, k,
                o.add(i * m * n + r.start * n), 1, n as isize, false,
                ap.offset(i as isize * a.bs + r.start as isize * a.rs), a.cs, a.rs,
                bp.offset(i as isize * b.bs), b.cs, b.rs,
                0f32, 1f32, false, false, false, gemm::Parallelism::None,
            )
        }
    };
    if crate::pool::active() && m >= 32 {
        // Training: every part takes its share of the rows of every batch, one region.
        let pool = crate::pool::pool();
        let chunk = m.div_ceil(pool.parts()).next_multiple_of(16);
        pool.execute(|part| {
            let r0 = part * chunk;
            if r0 < m {
                (0..batches).for_each(|i| rows(i, r0..m.min(r0 + chunk)));
            }
        });
    } else {
        use rayon::prelude::*;
        let chunk = m.div_ceil(rayon::current_num_threads()).next_multiple_of(16).max(16);
        (0..batches * m.div_ceil(chunk)).into_par_iter().for_each(|j| {
            let (i, c) = (j / m.div_ceil(chunk), j % m.div_ceil(chunk));
            rows(i, c * chunk..m.min((c + 1) * chunk));
        });
    }
    // SAFETY: every row of every batch was written by exactly one gemm call above.
    unsafe { out.set_len(batches * m * n) };
    Ok(out)
}

struct BatchMatmul;

impl CustomOp2 for BatchMatmul {
    fn name(&self) -> &'static str {
        "fused-bmm"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = (Strided::new(s1, l1, "bmm")?, Strided::new(s2, l2, "bmm")?);
        if l1.dims()[..l1.dims().len() - 2] != l2.dims()[..l2.dims().len().saturating_sub(2)] {
            bail!("bmm: batch dimensions {:?} and {:?} differ", l1.dims(), l2.dims())
        }
        let out = bmm_into(&a, &b, "bmm")?;
        let mut dims = l1.dims().to_vec();
        let last = dims.len() - 1;
        dims[last] = b.cols;
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }

    fn bwd(&self, a: &Tensor, b: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        // da = g · bᵀ and db = aᵀ · g, reading the operands through their own strides.
        let g = g.contiguous()?;
        let (ga, gl) = g.storage_and_layout();
        let (sa, la) = a.storage_and_layout();
        let (sb, lb) = b.storage_and_layout();
        let (da, db) = match (&*ga, &*sa, &*sb) {
            (candle_core::Storage::Cpu(gs), candle_core::Storage::Cpu(as_), candle_core::Storage::Cpu(bs)) => {
                let (gv, av, bv) = (Strided::new(gs, gl, "bmm")?, Strided::new(as_, la, "bmm")?, Strided::new(bs, lb, "bmm")?);
                (bmm_into(&gv, &bv.t(), "bmm backward")?, bmm_into(&av.t(), &gv, "bmm backward")?)
            }
            _ => bail!("bmm: CPU only"),
        };
        Ok((Some(Tensor::from_vec(da, a.shape(), a.device())?), Some(Tensor::from_vec(db, b.shape(), b.device())?)))
    }
}

/// `a · b` over matching leading (batch) dimensions, like `Tensor::matmul`; the operands may be
/// transposed views (`k.t()`), read through their strides without a copy.
pub fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    ensure_cpu_f32(a, "bmm")?;
    ensure_cpu_f32(b, "bmm")?;
    a.apply_op2(b, BatchMatmul)
}

// ---------------------------------------------------------------------------------------------
// Embedding lookup whose gradient is scattered into a gradient slot.

struct Embedding {
    ids: Vec<u32>,
    sink: std::sync::Arc<GradSlot>,
}

impl CustomOp1 for Embedding {
    fn name(&self) -> &'static str {
        "fused-embedding"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let w = f32_slice(s, l, "embedding")?;
        let (v, d) = l.shape().dims2()?;
        let mut out = Vec::with_capacity(self.ids.len() * d);
        for &id in &self.ids {
            if id as usize >= v {
                bail!("embedding: id {id} is outside the vocabulary ({v})")
            }
            out.extend_from_slice(&w[id as usize * d..(id as usize + 1) * d]);
        }
        Ok((CpuStorage::F32(out), Shape::from((self.ids.len(), d))))
    }

    fn bwd(&self, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        let (v, d) = w.dims2()?;
        if self.sink.len != v * d {
            bail!("embedding: gradient slot of {} for a [{v}, {d}] table", self.sink.len)
        }
        let g = g.contiguous()?;
        let (gs, gl) = g.storage_and_layout();
        let gv = match &*gs {
            candle_core::Storage::Cpu(c) => f32_slice(c, gl, "embedding")?,
            _ => bail!("embedding: CPU only"),
        };
        let mut slot = self.sink.lock()?;
        self.sink.set_squares(None)?;
        // Only the rows looked up change: a fresh slot must start at zero (the tied head, when
        // there is one, has usually written it already).
        let buf = slot.get_or_insert_with(|| vec![0f32; v * d]);
        for (r, &id) in self.ids.iter().enumerate() {
            let dst = &mut buf[id as usize * d..(id as usize + 1) * d];
            for (a, b) in dst.iter_mut().zip(&gv[r * d..(r + 1) * d]) {
                *a += b;
            }
        }
        Ok(None)
    }
}

/// Rows `ids` of `w` `[vocab, d]`; the gradient of `w` is accumulated into `sink`.
pub(crate) fn embedding_sink(w: &Tensor, ids: Vec<u32>, sink: std::sync::Arc<GradSlot>) -> Result<Tensor> {
    ensure_cpu_f32(w, "embedding")?;
    w.contiguous()?.apply_op1(Embedding { ids, sink })
}

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = x / sqrt(mean(x²) + eps) ⊙ w, over the last dimension.

struct RmsNorm {
    eps: f32,
}

/// `Σ a[i]·b[i]` in 16 independent f32 lanes (a single running sum is a serial chain of adds
/// that the compiler may not reorder; separate lanes vectorise).
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
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
unsafe fn dot_lanes_avx512(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes_portable(a, b)
}

#[inline(always)]
fn dot_lanes_portable(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn rms_inv(row: &[f32], eps: f32) -> f32 {
    1.0 / (dot_lanes(row, row) / row.len() as f32 + eps).sqrt()
}

/// Rows per task of the norm's backward (each task keeps its own partial `dw`).
const RMS_ROWS: usize = 16;

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "fused-rms-norm"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "rms_norm")?;
        let w = f32_slice(s2, l2, "rms_norm")?;
        if l1.dims().last() != Some(&w.len()) {
            bail!("rms_norm: last dimension of {:?} is not the weight's {}", l1.dims(), w.len())
        }
        Ok((CpuStorage::F32(rms_forward(x, w, self.eps)?), l1.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (x, w, g) = (x.contiguous()?, w.contiguous()?, g.contiguous()?);
        let (dx, dw) = with_slices(&[x.clone(), w.clone(), g], "rms_norm", |s| rms_backward(s[0], s[1], s[2], self.eps))?;
        let dx = Tensor::from_vec(dx, x.shape(), x.device())?;
        let dw = Tensor::from_vec(dw, w.shape(), w.device())?;
        Ok((Some(dx), Some(dw)))
    }
}

/// RMSNorm of the rows of `x` (`w.len()` wide) scaled by `w`.
fn rms_forward(x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>> {
    let d = w.len();
    if d == 0 || !x.len().is_multiple_of(d) {
        bail!("rms_norm: {} values are not rows of the weight's {d}", x.len())
    }
    let mut y = vec![0f32; x.len()];
    let out = SharedMut(y.as_mut_ptr());
    par_ranges(x.len() / d, 64, |rows| {
        // SAFETY: each range of rows is written by exactly one worker.
        let yr = unsafe { out.slice(rows.start * d..rows.end * d) };
        for (xr, yr) in x[rows.start * d..rows.end * d].chunks_exact(d).zip(yr.chunks_exact_mut(d)) {
            let r = rms_inv(xr, eps);
            for ((yv, xv), wv) in yr.iter_mut().zip(xr).zip(w) {
                *yv = xv * r * wv;
            }
        }
    });
    Ok(y)
}

/// Gradients `(dx, dw)` of [`rms_forward`] for the output gradient `g`.
///
/// With x̂ = x·r, y = x̂ ⊙ w:  dw = Σ_rows g ⊙ x̂;  dx = r · (g⊙w − x̂ · mean(g⊙w⊙x̂)).
fn rms_backward(xs: &[f32], ws: &[f32], gs: &[f32], eps: f32) -> Result<(Vec<f32>, Vec<f32>)> {
    let d = ws.len();
    if d == 0 || !xs.len().is_multiple_of(d) || gs.len() != xs.len() {
        bail!("rms_norm backward: x of {} and g of {} for a weight of {d}", xs.len(), gs.len())
    }
    let rows = xs.len() / d;
    let tasks = rows.div_ceil(RMS_ROWS);
    let mut dx = vec![0f32; xs.len()];
    let mut partial = vec![0f32; tasks * d];
    let (pdx, pdw) = (SharedMut(dx.as_mut_ptr()), SharedMut(partial.as_mut_ptr()));
    par_ranges(tasks, 2, |range| {
        for task in range {
            let r0 = task * RMS_ROWS;
            let r1 = rows.min(r0 + RMS_ROWS);
            // SAFETY: task `task` alone writes rows r0..r1 of dx and its own row of `partial`.
            let (dxt, dw) = unsafe { (pdx.slice(r0 * d..r1 * d), pdw.slice(task * d..(task + 1) * d)) };
            let span = r0 * d..r1 * d;
            for ((xr, gr), dxr) in xs[span.clone()].chunks_exact(d).zip(gs[span].chunks_exact(d)).zip(dxt.chunks_exact_mut(d)) {
                let r = rms_inv(xr, eps);
                // Σ g·w·x̂ = r · Σ (g·w)·x; dxr holds g·w until the last line.
                for ((o, &gv), &wv) in dxr.iter_mut().zip(gr).zip(ws) {
                    *o = gv * wv;
                }
                let mean = r * dot_lanes(dxr, xr) / d as f32;
                for (((o, &xv), &gv), dwv) in dxr.iter_mut().zip(xr).zip(gr).zip(dw.iter_mut()) {
                    let xh = xv * r;
                    *dwv += gv * xh;
                    *o = r * (*o - xh * mean);
                }
            }
        }
    });
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

// ---------------------------------------------------------------------------------------------
// SwiGLU: silu(gate) ⊙ up.

struct SwiGlu;

/// `out[j] = sigmoid(a[j])`, with the vectorised `exp` (libm's scalar `expf` was 2% of a
/// training step here). `exp(−a)` is taken at `min(−a, 88)`, where sigmoid is below 1e-38 anyway.
fn sigmoid_into(a: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(a) {
        *o = (-v).min(88.0);
    }
    crate::vexp::exp_in_place(out, 0.0, 1.0);
    for o in out.iter_mut() {
        *o = 1.0 / (1.0 + *o);
    }
}

/// Rows of this many elements at a time through [`sigmoid_into`] (a stack buffer).
const SIGMOID_RUN: usize = 256;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "fused-swiglu"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = f32_slice(s1, l1, "swiglu")?;
        let u = f32_slice(s2, l2, "swiglu")?;
        if l1.shape() != l2.shape() {
            bail!("swiglu: gate {:?} and up {:?} differ", l1.dims(), l2.dims())
        }
        Ok((CpuStorage::F32(swiglu_forward(g, u)), l1.shape().clone()))
    }

    fn bwd(&self, gate: &Tensor, up: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let a = gate.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let b = up.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let gs = g.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let (da, db, _) = swiglu_backward(&a, &b, &gs, false);
        Ok((
            Some(Tensor::from_vec(da, gate.shape(), gate.device())?),
            Some(Tensor::from_vec(db, up.shape(), up.device())?),
        ))
    }
}

/// `silu(a) ⊙ b` elementwise.
fn swiglu_forward(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut y = vec![0f32; a.len()];
    let out = SharedMut(y.as_mut_ptr());
    par_ranges(a.len(), 1 << 15, |range| {
        // SAFETY: each range is written by exactly one worker.
        let yr = unsafe { out.slice(range.clone()) };
        let mut s = [0f32; SIGMOID_RUN];
        for ((yr, a), b) in yr.chunks_mut(SIGMOID_RUN).zip(a[range.clone()].chunks(SIGMOID_RUN)).zip(b[range].chunks(SIGMOID_RUN)) {
            let s = &mut s[..a.len()];
            sigmoid_into(a, s);
            for (((y, &a), &b), &s) in yr.iter_mut().zip(a).zip(b).zip(s.iter()) {
                *y = a * s * b;
            }
        }
    });
    y
}

/// Gradients `(da, db)` of [`swiglu_forward`] for the output gradient `g`, and with `want_act`
/// the forward output too (one sigmoid pass for both).
///
/// d silu(a)/da = s·(1 + a·(1 − s)) with s = sigmoid(a).
fn swiglu_backward(a: &[f32], b: &[f32], gs: &[f32], want_act: bool) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut da = vec![0f32; a.len()];
    let mut db = vec![0f32; a.len()];
    let mut act = if want_act { vec![0f32; a.len()] } else { Vec::new() };
    let (pa, pb, py) = (SharedMut(da.as_mut_ptr()), SharedMut(db.as_mut_ptr()), SharedMut(act.as_mut_ptr()));
    par_ranges(a.len(), 1 << 15, |range| {
        // SAFETY: each range is written by exactly one worker (`act` only when it has the room).
        let (da, db) = unsafe { (pa.slice(range.clone()), pb.slice(range.clone())) };
        let mut act = want_act.then(|| unsafe { py.slice(range.clone()) });
        let mut sig = [0f32; SIGMOID_RUN];
        let start = range.start;
        for (c, a) in a[range].chunks(SIGMOID_RUN).enumerate() {
            let sig = &mut sig[..a.len()];
            sigmoid_into(a, sig);
            let off = c * SIGMOID_RUN;
            for (j, (&a, &s)) in a.iter().zip(sig.iter()).enumerate() {
                let (k, i) = (off + j, start + off + j);
                db[k] = gs[i] * a * s;
                da[k] = gs[i] * b[i] * s * (1.0 + a * (1.0 - s));
                if let Some(y) = act.as_deref_mut() {
                    y[k] = a * s * b[i];
                }
            }
        }
    });
    (da, db, act)
}

/// `silu(gate) ⊙ up` (same shapes).
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    ensure_cpu_f32(gate, "swiglu")?;
    gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)
}

// ---------------------------------------------------------------------------------------------
// A layer's attention block in one graph node: x + o(attention(rope(q(h)), rope(k(h)), v(h)))
// with h = rms(x). Same reason as the MLP block below: as about fifteen nodes (norm, three
// products, reshapes, RoPE, transposes, attention, output product, residual sum) each input
// gradient cost candle a zero fill and a fresh sum, and the shared norm output two more.

/// What an op's forward pass keeps for its backward pass (the op is applied once per graph).
struct Saved<T>(Mutex<Option<std::sync::Arc<T>>>);

impl<T> Saved<T> {
    fn new() -> Saved<T> {
        Saved(Mutex::new(None))
    }

    fn keep(&self, op: &str, v: T) -> Result<()> {
        *self.0.lock().map_err(|_| candle_core::Error::Msg(format!("{op}: poisoned")))? = Some(std::sync::Arc::new(v));
        Ok(())
    }

    fn get(&self, op: &str) -> Result<std::sync::Arc<T>> {
        self.0
            .lock()
            .map_err(|_| candle_core::Error::Msg(format!("{op}: poisoned")))?
            .clone()
            .ok_or_else(|| candle_core::Error::Msg(format!("{op}: backward before forward")))
    }
}

/// Runs `f` on the f32 data of contiguous CPU tensors.
fn with_slices<R>(t: &[Tensor], what: &str, f: impl FnOnce(&[&[f32]]) -> Result<R>) -> Result<R> {
    let guards: Vec<_> = t.iter().map(|x| x.storage_and_layout()).collect();
    let mut v: Vec<&[f32]> = Vec::with_capacity(t.len());
    for (s, l) in &guards {
        match &**s {
            candle_core::Storage::Cpu(c) => v.push(f32_slice(c, l, what)?),
            _ => bail!("{what}: CPU only"),
        }
    }
    f(&v)
}

/// The backward pass of a block `y = x + f(rms_norm(x, w))`: `grads(g)` returns the gradient
/// of the norm's output for the block's output gradient `g`; the norm's backward and the
/// residual path are added here.
fn residual_block_bwd(
    what: &str,
    x: &Tensor,
    nw: &Tensor,
    g: &Tensor,
    eps: f32,
    grads: impl FnOnce(&[f32]) -> Result<Vec<f32>>,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (x, nw, g) = (x.contiguous()?, nw.contiguous()?, g.contiguous()?);
    if g.elem_count() != x.elem_count() {
        bail!("{what} backward: gradient {:?} for input {:?}", g.dims(), x.dims())
    }
    let (dx, dnw) = with_slices(&[x.clone(), nw.clone(), g.clone()], what, |s| {
        let g_hn = grads(s[2])?;
        let (mut dx, dnw) = rms_backward(s[0], s[1], &g_hn, eps)?;
        // The residual path: the block's output gradient reaches x unchanged.
        add_into(&mut dx, s[2]);
        Ok((dx, dnw))
    })?;
    Ok((Some(Tensor::from_vec(dx, x.shape(), x.device())?), Some(Tensor::from_vec(dnw, nw.shape(), nw.device())?)))
}

/// `[b, t, h, hd]` → `[b, h, t, hd]`, or back with `inverse`.
fn transpose_heads(src: &[f32], [b, t, h, hd]: [usize; 4], inverse: bool) -> Vec<f32> {
    let mut out = vec![0f32; src.len()];
    for bi in 0..b {
        for ti in 0..t {
            for hi in 0..h {
                let (bthd, bhtd) = (((bi * t + ti) * h + hi) * hd, ((bi * h + hi) * t + ti) * hd);
                let (from, to) = if inverse { (bhtd, bthd) } else { (bthd, bhtd) };
                out[to..to + hd].copy_from_slice(&src[from..from + hd]);
            }
        }
    }
    out
}

struct AttentionBlock {
    eps: f32,
    /// q `[h·hd, d]`, k and v `[kvh·hd, d]`, o `[d, h·hd]`.
    w: [Tensor; 4],
    sinks: [std::sync::Arc<GradSlot>; 4],
    /// `[b, t, hd]` each.
    cos: std::sync::Arc<Vec<f32>>,
    sin: std::sync::Arc<Vec<f32>>,
    core: Attention,
    /// b, t, h, kvh, hd.
    dims: [usize; 5],
    /// h, rotated q, rotated k, v (heads first), p, attention output (heads last), from the
    /// forward pass.
    saved: Saved<[Vec<f32>; 6]>,
}

impl AttentionBlock {
    fn check(&self, d: usize) -> Result<()> {
        let [b, t, h, kvh, hd] = self.dims;
        let want = [(h * hd, d), (kvh * hd, d), (kvh * hd, d), (d, h * hd)];
        for (i, w) in self.w.iter().enumerate() {
            if w.dims2()? != want[i] || self.sinks[i].len != w.elem_count() {
                bail!("attention block: weight {i} is {:?}, expected {:?}", w.dims(), want[i])
            }
        }
        if hd % 2 != 0 || kvh == 0 || h % kvh != 0 || self.cos.len() != b * t * hd || self.sin.len() != b * t * hd {
            bail!("attention block: {h} heads, {kvh} kv heads of {hd} for tables of {}", self.cos.len())
        }
        Ok(())
    }
}

impl CustomOp2 for AttentionBlock {
    fn name(&self) -> &'static str {
        "fused-attention-block"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "attention block")?;
        let nw = f32_slice(s2, l2, "attention block")?;
        let d = nw.len();
        let [b, t, h, kvh, hd] = self.dims;
        let n = b * t;
        if l1.dims().last() != Some(&d) || x.len() != n * d {
            bail!("attention block: x {:?} for {b}×{t} tokens of width {d}", l1.dims())
        }
        self.check(d)?;
        let rep = h / kvh;
        let (y, saved) = with_slices(&self.w, "attention block", |w| {
            let [wq, wk, wv, wo] = [w[0], w[1], w[2], w[3]];
            let hn = rms_forward(x, nw, self.eps)?;
            let q = rope_apply(&matmul_wt(&hn, wq, n, d, h * hd, None), [b, t, h, hd], &self.cos, &self.sin, false);
            let k = rope_apply(&matmul_wt(&hn, wk, n, d, kvh * hd, None), [b, t, kvh, hd], &self.cos, &self.sin, false);
            let v = transpose_heads(&matmul_wt(&hn, wv, n, d, kvh * hd, None), [b, t, kvh, hd], false);
            let (qs, ks, vs) = (
                Strided::packed(&q, b * kvh, rep * t, hd),
                Strided::packed(&k, b * kvh, t, hd),
                Strided::packed(&v, b * kvh, t, hd),
            );
            let (o, p) = self.core.forward(&qs, &ks, &vs)?;
            let o = transpose_heads(&o, [b, t, h, hd], true);
            Ok((matmul_wt(&o, wo, n, h * hd, d, Some(x)), [hn, q, k, v, p, o]))
        })?;
        self.saved.keep("attention block", saved)?;
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, nw: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let saved = self.saved.get("attention block")?;
        let [hn, q, k, v, p, o] = &*saved;
        let d = nw.elem_count();
        self.check(d)?;
        let [b, t, h, kvh, hd] = self.dims;
        let (n, rep) = (b * t, h / kvh);
        if x.elem_count() != n * d || hn.len() != n * d {
            bail!("attention block backward: input {:?} for {b}×{t} tokens of width {d}", x.dims())
        }
        residual_block_bwd("attention block", x, nw, g, self.eps, |gs| {
            with_slices(&self.w, "attention block", |w| {
                let [wq, wk, wv, wo] = [w[0], w[1], w[2], w[3]];
                add_weight_grad(&self.sinks[3], gs, o, n, d, h * hd)?;
                let mut go = Vec::new();
                matmul_w_into(gs, wo, n, d, h * hd, &mut go, false);
                let go = transpose_heads(&go, [b, t, h, hd], false);
                let (qs, ks, vs) = (
                    Strided::packed(q, b * kvh, rep * t, hd),
                    Strided::packed(k, b * kvh, t, hd),
                    Strided::packed(v, b * kvh, t, hd),
                );
                let (dq, dk, dv) = self.core.backward(&qs, &ks, &vs, p, &Strided::packed(&go, b * kvh, rep * t, hd))?;
                drop(go);
                let dq = rope_apply(&dq, [b, t, h, hd], &self.cos, &self.sin, true);
                let dk = rope_apply(&dk, [b, t, kvh, hd], &self.cos, &self.sin, true);
                let dv = transpose_heads(&dv, [b, t, kvh, hd], true);
                add_weight_grad(&self.sinks[0], &dq, hn, n, h * hd, d)?;
                add_weight_grad(&self.sinks[1], &dk, hn, n, kvh * hd, d)?;
                add_weight_grad(&self.sinks[2], &dv, hn, n, kvh * hd, d)?;
                let mut g_hn = Vec::new();
                matmul_w_into(&dq, wq, n, h * hd, d, &mut g_hn, false);
                matmul_w_into(&dk, wk, n, kvh * hd, d, &mut g_hn, true);
                matmul_w_into(&dv, wv, n, kvh * hd, d, &mut g_hn, true);
                Ok(g_hn)
            })
        })
    }
}

/// The attention block's weights, gradient slots and position tables (q, k, v, o order).
pub(crate) struct AttentionBlockParts {
    pub w: [Tensor; 4],
    pub sinks: [std::sync::Arc<GradSlot>; 4],
    pub cos: std::sync::Arc<Vec<f32>>,
    pub sin: std::sync::Arc<Vec<f32>>,
    pub mask: std::sync::Arc<Vec<f32>>,
    /// b, t, h, kvh, hd.
    pub dims: [usize; 5],
    pub scale: f32,
    pub eps: f32,
}

/// `x + o(attention(rope(q(h)), rope(k(h)), v(h)))` with `h = rms_norm(x, norm_w)`, for `x`
/// `[b·t, d]` without a cache (the mask is `[b, t, t]`), as one graph node; the four projection
/// weights' gradients go to their slots.
pub(crate) fn attention_block(x: &Tensor, norm_w: &Tensor, parts: AttentionBlockParts) -> Result<Tensor> {
    ensure_cpu_f32(x, "attention block")?;
    let AttentionBlockParts { w, sinks, cos, sin, mask, dims, scale, eps } = parts;
    let [b, t, h, kvh, _] = dims;
    if mask.len() != b * t * t || kvh == 0 {
        bail!("attention block: a mask of {} for {b}×{t} tokens", mask.len())
    }
    let softmax = MaskedSoftmax { scale, mask, b, t, total: t, rows_per_batch_row: h / kvh * t * kvh };
    let w = [w[0].contiguous()?, w[1].contiguous()?, w[2].contiguous()?, w[3].contiguous()?];
    let core = Attention { softmax, p: Saved::new() };
    x.contiguous()?.apply_op2(&norm_w.contiguous()?, AttentionBlock { eps, w, sinks, cos, sin, core, dims, saved: Saved::new() })
}

// ---------------------------------------------------------------------------------------------
// A layer's MLP block in one graph node: x + down(silu(gate(rms(x))) ⊙ up(rms(x))).
//
// Why one node: as six (norm, three products, SwiGLU, residual sum) candle's autograd gave each
// of their inputs a zero-filled gradient and a fresh sum (about 2 M floats per layer and step,
// the largest share of a step's element-wise traffic), and the shared norm output two more.

struct MlpBlock {
    eps: f32,
    /// gate `[inter, d]`, up `[inter, d]`, down `[d, inter]`.
    w: [Tensor; 3],
    /// Their gradient slots.
    sinks: [std::sync::Arc<GradSlot>; 3],
    /// The norm's output and the two projections, kept by the forward pass for the backward.
    saved: Saved<[Vec<f32>; 3]>,
}

impl MlpBlock {
    fn shapes(&self, d: usize) -> Result<usize> {
        let inter = self.w[0].dim(0)?;
        if self.w[0].dims2()? != (inter, d) || self.w[1].dims2()? != (inter, d) || self.w[2].dims2()? != (d, inter) {
            bail!("mlp: weights {:?} {:?} {:?} for width {d}", self.w[0].dims(), self.w[1].dims(), self.w[2].dims())
        }
        for (w, s) in self.w.iter().zip(&self.sinks) {
            if s.len != w.elem_count() {
                bail!("mlp: gradient slot of {} for a {:?} weight", s.len, w.dims())
            }
        }
        Ok(inter)
    }
}

/// `dst += src` elementwise, split over the pool in the training pass.
fn add_into(dst: &mut [f32], src: &[f32]) {
    debug_assert_eq!(dst.len(), src.len());
    let out = SharedMut(dst.as_mut_ptr());
    par_ranges(dst.len().min(src.len()), 1 << 15, |r| {
        // SAFETY: each range is written by exactly one worker.
        let d = unsafe { out.slice(r.clone()) };
        for (a, &b) in d.iter_mut().zip(&src[r]) {
            *a += b;
        }
    });
}

impl CustomOp2 for MlpBlock {
    fn name(&self) -> &'static str {
        "fused-mlp-block"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "mlp")?;
        let nw = f32_slice(s2, l2, "mlp")?;
        let d = nw.len();
        if l1.dims().last() != Some(&d) {
            bail!("mlp: last dimension of {:?} is not the norm's {d}", l1.dims())
        }
        let inter = self.shapes(d)?;
        let n = x.len() / d;
        let (y, saved) = with_slices(&self.w, "mlp", |w| {
            let [wg, wu, wd] = [w[0], w[1], w[2]];
            let hn = rms_forward(x, nw, self.eps)?;
            let gate = matmul_wt(&hn, wg, n, d, inter, None);
            let up = matmul_wt(&hn, wu, n, d, inter, None);
            let act = swiglu_forward(&gate, &up);
            Ok((matmul_wt(&act, wd, n, inter, d, Some(x)), [hn, gate, up]))
        })?;
        self.saved.keep("mlp", saved)?;
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, nw: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let saved = self.saved.get("mlp")?;
        let [hn, gate, up] = &*saved;
        let d = nw.elem_count();
        let inter = self.shapes(d)?;
        let n = x.elem_count() / d.max(1);
        if hn.len() != n * d || gate.len() != n * inter {
            bail!("mlp backward: input {:?} for saved activations of {} rows", x.dims(), hn.len() / d.max(1))
        }
        residual_block_bwd("mlp", x, nw, g, self.eps, |gs| {
            with_slices(&self.w, "mlp", |w| {
                let [wg, wu, wd] = [w[0], w[1], w[2]];
                let mut g_act = Vec::new();
                matmul_w_into(gs, wd, n, d, inter, &mut g_act, false);
                let (dgate, dup, act) = swiglu_backward(gate, up, &g_act, true);
                drop(g_act);
                add_weight_grad(&self.sinks[2], gs, &act, n, d, inter)?;
                add_weight_grad(&self.sinks[0], &dgate, hn, n, inter, d)?;
                add_weight_grad(&self.sinks[1], &dup, hn, n, inter, d)?;
                let mut g_hn = Vec::new();
                matmul_w_into(&dgate, wg, n, inter, d, &mut g_hn, false);
                matmul_w_into(&dup, wu, n, inter, d, &mut g_hn, true);
                Ok(g_hn)
            })
        })
    }
}

/// `x + down(silu(gate(h)) ⊙ up(h))` with `h = rms_norm(x, norm_w)`, for `x` `[n, d]`, as one
/// graph node; the three projection weights' gradients go to their slots (gate, up, down).
pub(crate) fn mlp_block(
    x: &Tensor,
    norm_w: &Tensor,
    w: [Tensor; 3],
    sinks: [std::sync::Arc<GradSlot>; 3],
    eps: f32,
) -> Result<Tensor> {
    ensure_cpu_f32(x, "mlp")?;
    let w = [w[0].contiguous()?, w[1].contiguous()?, w[2].contiguous()?];
    x.contiguous()?.apply_op2(&norm_w.contiguous()?, MlpBlock { eps, w, sinks, saved: Saved::new() })
}

// ---------------------------------------------------------------------------------------------
// RoPE fused with the head transpose: [b, t, h, hd] → rotated [b, h, t, hd].

struct RopeTranspose {
    /// `[b, t, hd]` each: the angle tables of every row's positions.
    cos: std::sync::Arc<Vec<f32>>,
    sin: std::sync::Arc<Vec<f32>>,
}

/// `y = x⊙cos + rot(x)⊙sin` with `rot([x1, x2]) = [−x2, x1]`, reading `[b, t, h, hd]` and
/// writing `[b, h, t, hd]`. `inverse` applies the transpose of that map (its gradient):
/// `x = y⊙cos + rotᵀ(y⊙sin)`, `rotᵀ([u1, u2]) = [u2, −u1]`, reading `[b, h, t, hd]` and
/// writing `[b, t, h, hd]`.
fn rope_apply(src: &[f32], dims: [usize; 4], cos: &[f32], sin: &[f32], inverse: bool) -> Vec<f32> {
    let [b, t, h, hd] = dims;
    let half = hd / 2;
    let mut out = vec![0f32; src.len()];
    for bi in 0..b {
        for ti in 0..t {
            let c = &cos[(bi * t + ti) * hd..][..hd];
            let s = &sin[(bi * t + ti) * hd..][..hd];
            for hi in 0..h {
                let bthd = ((bi * t + ti) * h + hi) * hd;
                let bhtd = ((bi * h + hi) * t + ti) * hd;
                if !inverse {
                    let x = &src[bthd..bthd + hd];
                    let y = &mut out[bhtd..bhtd + hd];
                    for i in 0..half {
                        y[i] = x[i] * c[i] - x[i + half] * s[i];
                        y[i + half] = x[i + half] * c[i + half] + x[i] * s[i + half];
                    }
                } else {
                    let g = &src[bhtd..bhtd + hd];
                    let x = &mut out[bthd..bthd + hd];
                    for i in 0..half {
                        x[i] = g[i] * c[i] + g[i + half] * s[i + half];
                        x[i + half] = g[i + half] * c[i + half] - g[i] * s[i];
                    }
                }
            }
        }
    }
    out
}

impl CustomOp1 for RopeTranspose {
    fn name(&self) -> &'static str {
        "fused-rope-transpose"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, "rope")?;
        let (b, t, h, hd) = l.shape().dims4()?;
        if hd % 2 != 0 || self.cos.len() != b * t * hd {
            bail!("rope: tables do not match [{b}, {t}, {h}, {hd}]")
        }
        let y = rope_apply(x, [b, t, h, hd], &self.cos, &self.sin, false);
        Ok((CpuStorage::F32(y), Shape::from((b, h, t, hd))))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        let (b, t, h, hd) = x.dims4()?;
        let gs = g.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let dx = rope_apply(&gs, [b, t, h, hd], &self.cos, &self.sin, true);
        Ok(Some(Tensor::from_vec(dx, x.shape(), x.device())?))
    }
}

/// Rotary embedding (Hugging Face's non-interleaved halves) of `x` `[b, t, h, hd]`, returned
/// transposed to `[b, h, t, hd]`; `cos`/`sin` are `[b, t, hd]` flattened.
pub fn rope_transpose(x: &Tensor, cos: std::sync::Arc<Vec<f32>>, sin: std::sync::Arc<Vec<f32>>) -> Result<Tensor> {
    ensure_cpu_f32(x, "rope")?;
    x.contiguous()?.apply_op1(RopeTranspose { cos, sin })
}

// ---------------------------------------------------------------------------------------------
// Attention probabilities: softmax(scale · s + mask) over the last dimension.

struct MaskedSoftmax {
    scale: f32,
    /// `[b, t, total]` additive mask; the scores are `[b, kvh, rep, t, total]` (`rep·t` rows).
    mask: std::sync::Arc<Vec<f32>>,
    b: usize,
    t: usize,
    total: usize,
    /// `kvh · rep · t`: score rows per batch row.
    rows_per_batch_row: usize,
}

impl MaskedSoftmax {
    fn mask_row(&self, row: usize) -> &[f32] {
        // row = ((bi·kvh + kv)·rep + r)·t + ti: the batch row is row / (rows per batch row).
        let per_b = self.rows_per_batch_row;
        let bi = row / per_b;
        let ti = row % self.t;
        &self.mask[(bi * self.t + ti) * self.total..][..self.total]
    }
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "fused-masked-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, "masked_softmax")?;
        let total = self.total;
        if l.dims().last() != Some(&total) || x.len() % (self.b * self.t * total) != 0 {
            bail!("masked_softmax: scores {:?} do not match the mask [{}, {}, {total}]", l.dims(), self.b, self.t)
        }
        let rows = x.len() / total;
        let mut y = vec![0f32; x.len()];
        let out = SharedMut(y.as_mut_ptr());
        par_ranges(rows, 64, |range| {
            for row in range {
                let xr = &x[row * total..(row + 1) * total];
                // SAFETY: row `row` is written by exactly one worker.
                let yr = unsafe { out.slice(row * total..(row + 1) * total) };
                let m = self.mask_row(row);
                let max = crate::vexp::scale_add_max(xr, m, self.scale, yr);
                // Masked keys give exactly 0 (no slow underflow path in `vexp`).
                let sum = crate::vexp::exp_in_place(yr, max, 1.0);
                let inv = 1.0 / sum;
                for v in yr.iter_mut() {
                    *v *= inv;
                }
            }
        });
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        // ds = scale · p ⊙ (g − Σ_j g_j p_j)
        let p = res.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let gs = g.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let total = self.total;
        let mut dx = vec![0f32; p.len()];
        let out = SharedMut(dx.as_mut_ptr());
        par_ranges(p.len() / total, 64, |range| {
            for row in range {
                let (pr, gr) = (&p[row * total..(row + 1) * total], &gs[row * total..(row + 1) * total]);
                // SAFETY: row `row` is written by exactly one worker.
                let dr = unsafe { out.slice(row * total..(row + 1) * total) };
                let dot: f32 = pr.iter().zip(gr).map(|(a, b)| a * b).sum();
                for j in 0..total {
                    dr[j] = self.scale * pr[j] * (gr[j] - dot);
                }
            }
        });
        Ok(Some(Tensor::from_vec(dx, x.shape(), x.device())?))
    }
}

/// Attention probabilities `softmax(scale·scores + mask)` for scores `[b, kvh, rep·t, total]`
/// (query heads stacked kv-major, as the model lays them out) and `mask` `[b, t, total]`.
pub fn masked_softmax(
    scores: &Tensor,
    mask: std::sync::Arc<Vec<f32>>,
    scale: f32,
    b: usize,
    t: usize,
    total: usize,
) -> Result<Tensor> {
    ensure_cpu_f32(scores, "masked_softmax")?;
    let dims = scores.dims();
    if dims.len() != 4 || dims[0] != b || dims[3] != total || !dims[2].is_multiple_of(t) || mask.len() != b * t * total {
        bail!("masked_softmax: scores {dims:?} do not match the mask [{b}, {t}, {total}]")
    }
    let rows_per_batch_row = dims[1] * dims[2];
    scores.contiguous()?.apply_op1(MaskedSoftmax { scale, mask, b, t, total, rows_per_batch_row })
}

// ---------------------------------------------------------------------------------------------
// Attention in one graph node: o = softmax(scale·q·kᵀ + mask)·v.
//
// Why one node: candle's autograd gives every gradient a zero tensor and a fresh sum
// (`GradStore::or_insert` + `add`); the scores and the probabilities are the largest tensors of a
// layer (`[b, kvh, rep·t, total]`, 7 MB each at SmolLM2's shape and 256 tokens), so as two nodes
// they cost about 56 MB of extra memory traffic per layer and step.

struct Attention {
    softmax: MaskedSoftmax,
    /// The probabilities, saved by the forward pass for the backward pass.
    p: Saved<Vec<f32>>,
}

impl Strided<'_> {
    /// A contiguous `[batches, rows, cols]` buffer.
    fn packed(data: &[f32], batches: usize, rows: usize, cols: usize) -> Strided<'_> {
        Strided { data, batches, bs: (rows * cols) as isize, rs: cols as isize, cs: 1, rows, cols }
    }
}

impl Attention {
    /// `(o, p)`: the output `p·v` and the probabilities `p = softmax(scale·q·kᵀ + mask)`.
    fn forward(&self, q: &Strided, k: &Strided, v: &Strided) -> Result<(Vec<f32>, Vec<f32>)> {
        let mut p = bmm_into(q, &k.t(), "attention")?;
        self.softmax_in_place(&mut p);
        let o = bmm_into(&Strided::packed(&p, q.batches, q.rows, k.rows), v, "attention")?;
        Ok((o, p))
    }

    /// `(dq, dk, dv)` for the output gradient `g`, from the forward pass's probabilities `p`.
    fn backward(&self, q: &Strided, k: &Strided, v: &Strided, p: &[f32], g: &Strided) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let total = self.softmax.total;
        let pv = Strided::packed(p, q.batches, q.rows, total);
        let dv = bmm_into(&pv.t(), g, "attention backward")?;
        // dp = g·vᵀ, then ds = scale · p ⊙ (dp − Σ_j dp_j p_j), in place.
        let mut ds = bmm_into(g, &v.t(), "attention backward")?;
        let out = SharedMut(ds.as_mut_ptr());
        let scale = self.softmax.scale;
        par_ranges(ds.len() / total, 64, |range| {
            for row in range {
                let pr = &p[row * total..(row + 1) * total];
                // SAFETY: row `row` is read and written by exactly one task.
                let dr = unsafe { out.slice(row * total..(row + 1) * total) };
                let dot = dot_lanes(pr, dr);
                for (d, &pj) in dr.iter_mut().zip(pr) {
                    *d = scale * pj * (*d - dot);
                }
            }
        });
        let dsv = Strided::packed(&ds, q.batches, q.rows, total);
        Ok((bmm_into(&dsv, k, "attention backward")?, bmm_into(&dsv.t(), q, "attention backward")?, dv))
    }

    /// `softmax(scale·s + mask)` row by row, in place.
    fn softmax_in_place(&self, s: &mut [f32]) {
        let total = self.softmax.total;
        let out = SharedMut(s.as_mut_ptr());
        par_ranges(s.len() / total, 64, |range| {
            let mut tmp = vec![0f32; total];
            for row in range {
                // SAFETY: row `row` is read and written by exactly one task.
                let r = unsafe { out.slice(row * total..(row + 1) * total) };
                let max = crate::vexp::scale_add_max(r, self.softmax.mask_row(row), self.softmax.scale, &mut tmp);
                let sum = crate::vexp::exp_into(&tmp, r, max, 1.0);
                let inv = 1.0 / sum;
                for v in r.iter_mut() {
                    *v *= inv;
                }
            }
        });
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "fused-attention"
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let (q, k, v) = (Strided::new(s1, l1, "attention")?, Strided::new(s2, l2, "attention")?, Strided::new(s3, l3, "attention")?);
        if k.rows != self.softmax.total || v.rows != k.rows || k.cols != q.cols {
            bail!("attention: q {:?}, k {:?}, v {:?} for {} keys", l1.dims(), l2.dims(), l3.dims(), self.softmax.total)
        }
        let (o, p) = self.forward(&q, &k, &v)?;
        self.p.keep("attention", p)?;
        let mut dims = l1.dims().to_vec();
        let last = dims.len() - 1;
        dims[last] = v.cols;
        Ok((CpuStorage::F32(o), Shape::from(dims)))
    }

    fn bwd(&self, q: &Tensor, k: &Tensor, v: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let p = self.p.get("attention")?;
        let g = g.contiguous()?;
        let (sg, lg) = g.storage_and_layout();
        let (sq, lq) = q.storage_and_layout();
        let (sk, lk) = k.storage_and_layout();
        let (sv, lv) = v.storage_and_layout();
        let total = self.softmax.total;
        let (dq, dk, dv) = match (&*sg, &*sq, &*sk, &*sv) {
            (candle_core::Storage::Cpu(gs), candle_core::Storage::Cpu(qs), candle_core::Storage::Cpu(ks), candle_core::Storage::Cpu(vs)) => {
                let (gv, qv, kv, vv) = (
                    Strided::new(gs, lg, "attention")?,
                    Strided::new(qs, lq, "attention")?,
                    Strided::new(ks, lk, "attention")?,
                    Strided::new(vs, lv, "attention")?,
                );
                if p.len() != qv.batches * qv.rows * total {
                    bail!("attention: saved probabilities do not match q {:?}", lq.dims())
                }
                self.backward(&qv, &kv, &vv, &p, &gv)?
            }
            _ => bail!("attention: CPU only"),
        };
        Ok((
            Some(Tensor::from_vec(dq, q.shape(), q.device())?),
            Some(Tensor::from_vec(dk, k.shape(), k.device())?),
            Some(Tensor::from_vec(dv, v.shape(), v.device())?),
        ))
    }
}

/// `softmax(scale·q·kᵀ + mask)·v` for `q` `[b, kvh, rep·t, hd]` (query heads stacked kv-major),
/// `k`, `v` `[b, kvh, total, hd]` and `mask` `[b, t, total]`: [`bmm`], [`masked_softmax`] and
/// [`bmm`] as one graph node (the probabilities are kept for the backward pass).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: std::sync::Arc<Vec<f32>>,
    scale: f32,
    b: usize,
    t: usize,
    total: usize,
) -> Result<Tensor> {
    for (x, what) in [(q, "q"), (k, "k"), (v, "v")] {
        ensure_cpu_f32(x, "attention")?;
        if x.rank() != 4 || x.dim(0)? != b {
            bail!("attention: {what} is {:?}, not [{b}, kv heads, rows, head dim]", x.dims())
        }
    }
    let dims = q.dims();
    if !dims[2].is_multiple_of(t) || mask.len() != b * t * total || k.dim(2)? != total {
        bail!("attention: q {dims:?} and k {:?} do not match the mask [{b}, {t}, {total}]", k.dims())
    }
    let softmax = MaskedSoftmax { scale, mask, b, t, total, rows_per_batch_row: dims[1] * dims[2] };
    q.apply_op3(k, v, Attention { softmax, p: Saved::new() })
}

// ---------------------------------------------------------------------------------------------
// Weighted cross-entropy: Σ_i w_i (logsumexp(z_i) − z_i[y_i]) over logits rows.

struct WeightedCe {
    labels: Vec<u32>,
    weights: Vec<f32>,
    /// logsumexp of each row, saved by the forward pass for the backward pass.
    lse: Mutex<Vec<f32>>,
}

fn row_lse(z: &[f32]) -> f32 {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    max + crate::vexp::exp_sum(z, max).ln()
}

impl CustomOp1 for WeightedCe {
    fn name(&self) -> &'static str {
        "fused-weighted-cross-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let z = f32_slice(s, l, "weighted_ce")?;
        let (n, v) = l.shape().dims2()?;
        if self.labels.len() != n || self.weights.len() != n {
            bail!("weighted_ce: {n} rows but {} labels and {} weights", self.labels.len(), self.weights.len())
        }
        if let Some(&bad) = self.labels.iter().find(|&&y| y as usize >= v) {
            bail!("weighted_ce: label {bad} is outside the vocabulary ({v})")
        }
        let mut lse = vec![0f32; n];
        let out = SharedMut(lse.as_mut_ptr());
        par_ranges(n, 8, |range| {
            // SAFETY: each range of rows is written by exactly one worker.
            let dst = unsafe { out.slice(range.clone()) };
            for (k, i) in range.enumerate() {
                dst[k] = row_lse(&z[i * v..(i + 1) * v]);
            }
        });
        let mut total = 0f32;
        for i in 0..n {
            total += self.weights[i] * (lse[i] - z[i * v + self.labels[i] as usize]);
        }
        *self.lse.lock().map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))? = lse;
        Ok((CpuStorage::F32(vec![total]), Shape::from(())))
    }

    fn bwd(&self, z: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        // dz_i = g · w_i · (softmax(z_i) − onehot(y_i))
        let gscale = g.to_scalar::<f32>()?;
        let (n, v) = z.dims2()?;
        let lse = self.lse.lock().map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))?;
        if lse.len() != n {
            bail!("weighted_ce: backward without forward")
        }
        let zc = z.contiguous()?;
        let (st, lay) = zc.storage_and_layout();
        let zs = match &*st {
            candle_core::Storage::Cpu(c) => f32_slice(c, lay, "weighted_ce")?,
            _ => bail!("weighted_ce: CPU only"),
        };
        let mut dz = vec![0f32; n * v];
        let out = SharedMut(dz.as_mut_ptr());
        par_ranges(n, 8, |range| {
            for i in range {
                // SAFETY: row i is written by exactly one worker.
                let dr = unsafe { out.slice(i * v..(i + 1) * v) };
                let c = gscale * self.weights[i];
                let zr = &zs[i * v..(i + 1) * v];
                if c == 0.0 {
                    continue; // weight-0 rows (and padding) contribute nothing
                }
                crate::vexp::exp_into(zr, dr, lse[i], c);
                dr[self.labels[i] as usize] -= c;
            }
        });
        drop(st);
        Ok(Some(Tensor::from_vec(dz, (n, v), z.device())?))
    }
}

/// `Σ_i weights_i · (−log softmax(logits_i)[labels_i])` as a scalar, for logits `[n, vocab]`.
pub fn weighted_cross_entropy(logits: &Tensor, labels: Vec<u32>, weights: Vec<f32>) -> Result<Tensor> {
    ensure_cpu_f32(logits, "weighted_ce")?;
    logits.contiguous()?.apply_op1(WeightedCe { labels, weights, lse: Mutex::new(Vec::new()) })
}

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

    fn cpu_fwd(&self, dst: &mut CpuStorage, dst_l: &Layout, src: &CpuStorage, src_l: &Layout) -> Result<()> {
        let g = f32_slice(src, src_l, "adamw")?;
        let p = f32_slice_mut(dst, dst_l, "adamw")?;
        let mut m = self.m.lock().map_err(|_| candle_core::Error::Msg("adamw: poisoned".into()))?;
        let mut v = self.v.lock().map_err(|_| candle_core::Error::Msg("adamw: poisoned".into()))?;
        let n = g.len();
        if p.len() != n || m.len() != n || v.len() != n {
            bail!("adamw: parameter, gradient and moments differ in size")
        }
        let (pp, mp, vp) = (SharedMut(p.as_mut_ptr()), SharedMut(m.as_mut_ptr()), SharedMut(v.as_mut_ptr()));
        let (b1, b2, decay, eps) = (self.b1, self.b2, self.decay, self.eps);
        // step = (m/c1) / (sqrt(v/c2) + eps) = m·(lr/c1) / (sqrt(v)·(1/sqrt(c2)) + eps): one
        // division and one square root per element instead of three divisions.
        let k1 = self.lr / self.c1;
        let k2 = 1.0 / self.c2.sqrt();
        let scale = self.grad_scale.unwrap_or(1.0);
        par_ranges(n, 1 << 16, |range| {
            // SAFETY: each range is written by exactly one worker.
            let (p, m, v) = unsafe { (pp.slice(range.clone()), mp.slice(range.clone()), vp.slice(range.clone())) };
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

struct AddAssign;

impl InplaceOp2 for AddAssign {
    fn name(&self) -> &'static str {
        "add-assign"
    }

    fn cpu_fwd(&self, dst: &mut CpuStorage, dst_l: &Layout, src: &CpuStorage, src_l: &Layout) -> Result<()> {
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
fn sum_squares_slice(s: &[f32]) -> f64 {
    // f32 partial sums over runs of 4,096, f64 across runs, added up in order (the same total
    // whichever thread took which run).
    const RUN: usize = 1 << 12;
    let mut runs = vec![0f64; s.len().div_ceil(RUN)];
    let out = SharedMutF64(runs.as_mut_ptr());
    par_ranges(runs.len(), 16, |range| {
        for r in range {
            // SAFETY: run `r` is written by the one task that was given it.
            unsafe { out.write(r, sum_squares_run(&s[r * RUN..s.len().min((r + 1) * RUN)])) };
        }
    });
    runs.iter().sum()
}

#[derive(Clone, Copy)]
struct SharedMutF64(*mut f64);
// SAFETY: used only to write disjoint elements from parallel tasks, as `SharedMut`.
unsafe impl Send for SharedMutF64 {}
unsafe impl Sync for SharedMutF64 {}

impl SharedMutF64 {
    /// # Safety
    /// `i` must be in bounds and no other thread may touch element `i` concurrently.
    unsafe fn write(&self, i: usize, v: f64) {
        *self.0.add(i) = v;
    }
}

/// `Σ x²` of a short run in 32 independent f32 lanes: a single running sum is one serial chain
/// of adds that the compiler may not reorder (4% of a training step); separate lanes vectorise.
fn sum_squares_run(c: &[f32]) -> f64 {
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
unsafe fn sum_squares_run_avx512(c: &[f32]) -> f64 {
    sum_squares_run_portable(c)
}

#[inline(always)]
fn sum_squares_run_portable(c: &[f32]) -> f64 {
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

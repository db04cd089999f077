//! Attention: the strided batched matmul, RoPE with the head transpose, the masked softmax,
//! and attention as one graph node.

use super::*;

// ---------------------------------------------------------------------------------------------
// Batched matmul for attention (`q·kᵀ`, `p·v`), strided operands, products on the spin pool.

/// A `[.., rows, cols]` operand: the f32 storage from its offset, and (batches, batch stride,
/// row stride, column stride), when its leading dimensions collapse into one batch stride.
pub(super) struct Strided<'a> {
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
        let CpuStorage::F32(v) = s else {
            bail!("{op}: only f32 is supported")
        };
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
                Some(_) => {
                    bail!("{op}: batch dimensions {dims:?} with strides {st:?} do not collapse")
                }
            }
            next = Some(st[i] * dims[i]);
        }
        // The farthest element must lie in the storage (candle's layouts guarantee it; checked
        // because the products below read through raw pointers).
        let last: usize = dims
            .iter()
            .zip(st)
            .map(|(&d, &s)| d.saturating_sub(1) * s)
            .sum();
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
        Strided {
            rs: self.cs,
            cs: self.rs,
            rows: self.cols,
            cols: self.rows,
            ..*self
        }
    }
}

/// `out[i] = a[i] · b[i]` for every batch `i` (out contiguous `[batches, a.rows, b.cols]`).
pub(super) fn bmm_into(a: &Strided, b: &Strided, op: &str) -> Result<Vec<f32>> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || a.batches != b.batches {
        bail!(
            "{op}: [{}, {m}, {k}] · [{}, {}, {n}]",
            a.batches,
            b.batches,
            b.rows
        )
    }
    let batches = a.batches;
    let mut out: Vec<f32> = Vec::with_capacity(batches * m * n);
    if k == 0 {
        out.resize(batches * m * n, 0.0);
        return Ok(out);
    }
    let (o, ap, bp) = (
        out.as_mut_ptr() as usize,
        a.data.as_ptr() as usize,
        b.data.as_ptr() as usize,
    );
    // Rows `r` of batch `i`: one single-threaded gemm.
    let rows = |i: usize, r: Range<usize>| {
        let (o, ap, bp) = (o as *mut f32, ap as *const f32, bp as *const f32);
        // SAFETY: `Strided::new` checked both operands' extents; each call writes rows `r` of
        // batch `i` of `out` (capacity batches·m·n), disjoint from every other call's.
        unsafe {
            gemm_f32_on(
                gemm::Parallelism::None,
                r.len(),
                n,
                k,
                o.add(i * m * n + r.start * n),
                n as isize,
                false,
                ap.offset(i as isize * a.bs + r.start as isize * a.rs),
                a.cs,
                a.rs,
                bp.offset(i as isize * b.bs),
                b.cs,
                b.rs,
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
        let chunk = m
            .div_ceil(rayon::current_num_threads())
            .next_multiple_of(16)
            .max(16);
        (0..batches * m.div_ceil(chunk))
            .into_par_iter()
            .for_each(|j| {
                let (i, c) = (j / m.div_ceil(chunk), j % m.div_ceil(chunk));
                rows(i, c * chunk..m.min((c + 1) * chunk));
            });
    }
    // SAFETY: every row of every batch was written by exactly one gemm call above.
    unsafe { out.set_len(batches * m * n) };
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// RoPE fused with the head transpose: [b, t, h, hd] → rotated [b, h, t, hd].

pub(super) struct RopeTranspose {
    /// `[b, t, hd]` each: the angle tables of every row's positions.
    cos: std::sync::Arc<Vec<f32>>,
    sin: std::sync::Arc<Vec<f32>>,
}

/// `y = x⊙cos + rot(x)⊙sin` with `rot([x1, x2]) = [−x2, x1]`, reading `[b, t, h, hd]` and
/// writing `[b, h, t, hd]`. `inverse` applies the transpose of that map (its gradient):
/// `x = y⊙cos + rotᵀ(y⊙sin)`, `rotᵀ([u1, u2]) = [u2, −u1]`, reading `[b, h, t, hd]` and
/// writing `[b, t, h, hd]`.
pub(super) fn rope_apply(
    src: &[f32],
    dims: [usize; 4],
    cos: &[f32],
    sin: &[f32],
    inverse: bool,
) -> Vec<f32> {
    let [b, t, h, hd] = dims;
    let half = hd / 2;
    let n = b * t * h * hd;
    assert!(
        hd.is_multiple_of(2)
            && src.len() == n
            && cos.len() >= b * t * hd
            && sin.len() >= b * t * hd
    );
    // Not zeroed first (a serial pass before the parallel one): every element is written below.
    let mut out: Vec<f32> = Vec::with_capacity(n);
    let dst = SharedMut(out.as_mut_ptr());
    // Rows are (batch, position) pairs; each writes its own h head rows of the output.
    par_ranges(b * t, 64, |rows| {
        for bt in rows {
            let (bi, ti) = (bt / t, bt % t);
            let c = &cos[bt * hd..][..hd];
            let s = &sin[bt * hd..][..hd];
            for hi in 0..h {
                let bthd = (bt * h + hi) * hd;
                let bhtd = ((bi * h + hi) * t + ti) * hd;
                if !inverse {
                    let x = &src[bthd..bthd + hd];
                    // SAFETY: head row (bi, hi, ti) belongs to this (batch, position) row only.
                    let y = unsafe { dst.uninit(bhtd..bhtd + hd) };
                    for i in 0..half {
                        y[i].write(x[i] * c[i] - x[i + half] * s[i]);
                        y[i + half].write(x[i + half] * c[i + half] + x[i] * s[i + half]);
                    }
                } else {
                    let g = &src[bhtd..bhtd + hd];
                    // SAFETY: as above, for row (bi, ti, hi).
                    let x = unsafe { dst.uninit(bthd..bthd + hd) };
                    for i in 0..half {
                        x[i].write(g[i] * c[i] + g[i + half] * s[i + half]);
                        x[i + half].write(g[i + half] * c[i + half] - g[i] * s[i]);
                    }
                }
            }
        }
    });
    // SAFETY: every (batch, position, head) row was written above, both halves (hd is even).
    unsafe { out.set_len(n) };
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
pub fn rope_transpose(
    x: &Tensor,
    cos: std::sync::Arc<Vec<f32>>,
    sin: std::sync::Arc<Vec<f32>>,
) -> Result<Tensor> {
    ensure_cpu_f32(x, "rope")?;
    x.contiguous()?.apply_op1(RopeTranspose { cos, sin })
}

// ---------------------------------------------------------------------------------------------
// Attention probabilities: softmax(scale · s + mask) over the last dimension.

pub(super) struct MaskedSoftmax {
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
    /// `softmax(scale·x + mask)` of every row of `x` (`total` wide) into a new buffer.
    fn forward_rows(&self, x: &[f32]) -> Vec<f32> {
        let total = self.total;
        assert!(total > 0 && x.len().is_multiple_of(total));
        // Not zeroed first (a serial pass before the parallel one): every row is written below.
        let mut y = Vec::with_capacity(x.len());
        let out = SharedMut(y.as_mut_ptr());
        par_ranges(x.len() / total, 64, |range| {
            for row in range {
                let xr = &x[row * total..(row + 1) * total];
                // SAFETY: row `row` is written by exactly one worker, within y's capacity.
                let yr = unsafe { out.uninit(row * total..(row + 1) * total) };
                let (max, yr) = crate::vexp::scale_add_max(xr, self.mask_row(row), self.scale, yr);
                // Masked keys give exactly 0 (no slow underflow path in `vexp`).
                let sum = crate::vexp::exp_in_place(yr, max, 1.0);
                let inv = 1.0 / sum;
                for v in yr.iter_mut() {
                    *v *= inv;
                }
            }
        });
        // SAFETY: the rows cover all of x.len() (a multiple of total), each written above.
        unsafe { y.set_len(x.len()) };
        y
    }

    /// The scores' gradient from the probabilities `p` and their gradient `g`, in place of `g`:
    /// `scale · p ⊙ (g − Σ_j g_j p_j)` row by row.
    fn backward_rows(&self, p: &[f32], g: &mut [f32]) {
        let total = self.total;
        let out = SharedMut(g.as_mut_ptr());
        par_ranges(g.len() / total, 64, |range| {
            for row in range {
                let pr = &p[row * total..(row + 1) * total];
                // SAFETY: row `row` is read and written by exactly one task.
                let dr = unsafe { out.slice(row * total..(row + 1) * total) };
                let dot = dot_lanes(pr, dr);
                for (d, &pj) in dr.iter_mut().zip(pr) {
                    *d = self.scale * pj * (*d - dot);
                }
            }
        });
    }

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
            bail!(
                "masked_softmax: scores {:?} do not match the mask [{}, {}, {total}]",
                l.dims(),
                self.b,
                self.t
            )
        }
        let y = self.forward_rows(x);
        Ok((CpuStorage::F32(y), l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        let mut dx = g.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        with_slices(&[res.contiguous()?], "masked_softmax", |p| {
            if p[0].len() != dx.len() {
                bail!(
                    "masked_softmax backward: {} probabilities for a gradient of {}",
                    p[0].len(),
                    dx.len()
                )
            }
            self.backward_rows(p[0], &mut dx);
            Ok(())
        })?;
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
    if dims.len() != 4
        || dims[0] != b
        || dims[3] != total
        || !dims[2].is_multiple_of(t)
        || mask.len() != b * t * total
    {
        bail!("masked_softmax: scores {dims:?} do not match the mask [{b}, {t}, {total}]")
    }
    let rows_per_batch_row = dims[1] * dims[2];
    scores.contiguous()?.apply_op1(MaskedSoftmax {
        scale,
        mask,
        b,
        t,
        total,
        rows_per_batch_row,
    })
}

// ---------------------------------------------------------------------------------------------
// Attention in one graph node: o = softmax(scale·q·kᵀ + mask)·v.
//
// Why one node: candle's autograd gives every gradient a zero tensor and a fresh sum
// (`GradStore::or_insert` + `add`); the scores and the probabilities are the largest tensors of a
// layer (`[b, kvh, rep·t, total]`, 7 MB each at SmolLM2's shape and 256 tokens), so as two nodes
// they cost about 56 MB of extra memory traffic per layer and step.

pub(super) struct Attention {
    softmax: MaskedSoftmax,
    /// The probabilities, saved by the forward pass for the backward pass.
    p: Saved<Vec<f32>>,
}

impl Strided<'_> {
    /// A contiguous `[batches, rows, cols]` buffer.
    pub(super) fn packed(data: &[f32], batches: usize, rows: usize, cols: usize) -> Strided<'_> {
        Strided {
            data,
            batches,
            bs: (rows * cols) as isize,
            rs: cols as isize,
            cs: 1,
            rows,
            cols,
        }
    }
}

impl Attention {
    /// For scores `[b, kvh, rep·t, total]` (`rows_per_batch_row` = kvh·rep·t) and `mask`
    /// `[b, t, total]`.
    pub(super) fn new(
        mask: std::sync::Arc<Vec<f32>>,
        scale: f32,
        [b, t, total]: [usize; 3],
        rows_per_batch_row: usize,
    ) -> Attention {
        Attention {
            softmax: MaskedSoftmax {
                scale,
                mask,
                b,
                t,
                total,
                rows_per_batch_row,
            },
            p: Saved::new(),
        }
    }

    /// `(o, p)`: the output `p·v` and the probabilities `p = softmax(scale·q·kᵀ + mask)`.
    pub(super) fn forward(
        &self,
        q: &Strided,
        k: &Strided,
        v: &Strided,
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let p = self
            .softmax
            .forward_rows(&bmm_into(q, &k.t(), "attention")?);
        let o = bmm_into(
            &Strided::packed(&p, q.batches, q.rows, k.rows),
            v,
            "attention",
        )?;
        Ok((o, p))
    }

    /// `(dq, dk, dv)` for the output gradient `g`, from the forward pass's probabilities `p`.
    pub(super) fn backward(
        &self,
        q: &Strided,
        k: &Strided,
        v: &Strided,
        p: &[f32],
        g: &Strided,
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let total = self.softmax.total;
        let pv = Strided::packed(p, q.batches, q.rows, total);
        let dv = bmm_into(&pv.t(), g, "attention backward")?;
        // dp = g·vᵀ, then ds = scale · p ⊙ (dp − Σ_j dp_j p_j), in place.
        let mut ds = bmm_into(g, &v.t(), "attention backward")?;
        self.softmax.backward_rows(p, &mut ds);
        let dsv = Strided::packed(&ds, q.batches, q.rows, total);
        Ok((
            bmm_into(&dsv, k, "attention backward")?,
            bmm_into(&dsv.t(), q, "attention backward")?,
            dv,
        ))
    }
}

impl CustomOp3 for Attention {
    fn name(&self) -> &'static str {
        "fused-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (q, k, v) = (
            Strided::new(s1, l1, "attention")?,
            Strided::new(s2, l2, "attention")?,
            Strided::new(s3, l3, "attention")?,
        );
        if k.rows != self.softmax.total || v.rows != k.rows || k.cols != q.cols {
            bail!(
                "attention: q {:?}, k {:?}, v {:?} for {} keys",
                l1.dims(),
                l2.dims(),
                l3.dims(),
                self.softmax.total
            )
        }
        let (o, p) = self.forward(&q, &k, &v)?;
        self.p.keep("attention", p)?;
        let mut dims = l1.dims().to_vec();
        let last = dims.len() - 1;
        dims[last] = v.cols;
        Ok((CpuStorage::F32(o), Shape::from(dims)))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let p = self.p.get("attention")?;
        let g = g.contiguous()?;
        let (sg, lg) = g.storage_and_layout();
        let (sq, lq) = q.storage_and_layout();
        let (sk, lk) = k.storage_and_layout();
        let (sv, lv) = v.storage_and_layout();
        let total = self.softmax.total;
        let (dq, dk, dv) = match (&*sg, &*sq, &*sk, &*sv) {
            (
                candle_core::Storage::Cpu(gs),
                candle_core::Storage::Cpu(qs),
                candle_core::Storage::Cpu(ks),
                candle_core::Storage::Cpu(vs),
            ) => {
                let (gv, qv, kv, vv) = (
                    Strided::new(gs, lg, "attention")?,
                    Strided::new(qs, lq, "attention")?,
                    Strided::new(ks, lk, "attention")?,
                    Strided::new(vs, lv, "attention")?,
                );
                if p.len() != qv.batches * qv.rows * total {
                    bail!(
                        "attention: saved probabilities do not match q {:?}",
                        lq.dims()
                    )
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
/// `k`, `v` `[b, kvh, total, hd]` and `mask` `[b, t, total]`: two batched products around
/// [`masked_softmax`] as one graph node (the probabilities are kept for the backward pass).
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
            bail!(
                "attention: {what} is {:?}, not [{b}, kv heads, rows, head dim]",
                x.dims()
            )
        }
    }
    let dims = q.dims();
    if !dims[2].is_multiple_of(t) || mask.len() != b * t * total || k.dim(2)? != total {
        bail!(
            "attention: q {dims:?} and k {:?} do not match the mask [{b}, {t}, {total}]",
            k.dims()
        )
    }
    q.apply_op3(
        k,
        v,
        Attention::new(mask, scale, [b, t, total], dims[1] * dims[2]),
    )
}

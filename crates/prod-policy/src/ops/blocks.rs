//! A layer's attention and MLP blocks, each one graph node (see `attention_block` and
//! `mlp_block`).

use super::*;

// ---------------------------------------------------------------------------------------------
// A layer's attention block in one graph node: x + o(attention(rope(q(h)), rope(k(h)), v(h)))
// with h = rms(x). Same reason as the MLP block below: as about fifteen nodes (norm, three
// products, reshapes, RoPE, transposes, attention, output product, residual sum) each input
// gradient cost candle a zero fill and a fresh sum, and the shared norm output two more.

/// The backward pass of a block `y = x + f(rms_norm(x, w))`: `grads(g)` returns the gradient
/// of the norm's output for the block's output gradient `g`; the norm's backward and the
/// residual path are added here.
pub(super) fn residual_block_bwd(
    what: &str,
    x: &Tensor,
    nw: &Tensor,
    g: &Tensor,
    eps: f32,
    grads: impl FnOnce(&[f32]) -> Result<Vec<f32>>,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (x, nw, g) = (x.contiguous()?, nw.contiguous()?, g.contiguous()?);
    if g.elem_count() != x.elem_count() {
        bail!(
            "{what} backward: gradient {:?} for input {:?}",
            g.dims(),
            x.dims()
        )
    }
    let (dx, dnw) = with_slices(&[x.clone(), nw.clone(), g.clone()], what, |s| {
        let g_hn = grads(s[2])?;
        let (mut dx, dnw) = rms_backward(s[0], s[1], &g_hn, eps)?;
        // The residual path: the block's output gradient reaches x unchanged.
        add_into(&mut dx, s[2]);
        Ok((dx, dnw))
    })?;
    Ok((
        Some(Tensor::from_vec(dx, x.shape(), x.device())?),
        Some(Tensor::from_vec(dnw, nw.shape(), nw.device())?),
    ))
}

/// `[b, t, h, hd]` → `[b, h, t, hd]`, or back with `inverse`.
pub(super) fn transpose_heads(src: &[f32], [b, t, h, hd]: [usize; 4], inverse: bool) -> Vec<f32> {
    let n = b * t * h * hd;
    assert_eq!(src.len(), n);
    // Not zeroed first: every element is written below.
    let mut out: Vec<f32> = Vec::with_capacity(n);
    let dst = out.spare_capacity_mut();
    for bi in 0..b {
        for ti in 0..t {
            for hi in 0..h {
                let (bthd, bhtd) = (((bi * t + ti) * h + hi) * hd, ((bi * h + hi) * t + ti) * hd);
                let (from, to) = if inverse { (bhtd, bthd) } else { (bthd, bhtd) };
                for (o, &v) in dst[to..to + hd].iter_mut().zip(&src[from..from + hd]) {
                    o.write(v);
                }
            }
        }
    }
    // SAFETY: (bi, ti, hi) runs over every head row of both layouts, so all n were written.
    unsafe { out.set_len(n) };
    out
}

pub(super) struct AttentionBlock {
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
                bail!(
                    "attention block: weight {i} is {:?}, expected {:?}",
                    w.dims(),
                    want[i]
                )
            }
        }
        if hd % 2 != 0
            || kvh == 0
            || h % kvh != 0
            || self.cos.len() != b * t * hd
            || self.sin.len() != b * t * hd
        {
            bail!(
                "attention block: {h} heads, {kvh} kv heads of {hd} for tables of {}",
                self.cos.len()
            )
        }
        Ok(())
    }
}

impl CustomOp2 for AttentionBlock {
    fn name(&self) -> &'static str {
        "fused-attention-block"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "attention block")?;
        let nw = f32_slice(s2, l2, "attention block")?;
        let d = nw.len();
        let [b, t, h, kvh, hd] = self.dims;
        let n = b * t;
        if l1.dims().last() != Some(&d) || x.len() != n * d {
            bail!(
                "attention block: x {:?} for {b}×{t} tokens of width {d}",
                l1.dims()
            )
        }
        self.check(d)?;
        let rep = h / kvh;
        let (y, saved) = with_slices(&self.w, "attention block", |w| {
            let [wq, wk, wv, wo] = [w[0], w[1], w[2], w[3]];
            let hn = rms_forward(x, nw, self.eps)?;
            let q = rope_apply(
                &matmul_wt(&hn, wq, n, d, h * hd, None),
                [b, t, h, hd],
                &self.cos,
                &self.sin,
                false,
            );
            let k = rope_apply(
                &matmul_wt(&hn, wk, n, d, kvh * hd, None),
                [b, t, kvh, hd],
                &self.cos,
                &self.sin,
                false,
            );
            let v = transpose_heads(
                &matmul_wt(&hn, wv, n, d, kvh * hd, None),
                [b, t, kvh, hd],
                false,
            );
            let (qs, ks, vs) = (
                Strided::packed(&q, b * kvh, rep * t, hd),
                Strided::packed(&k, b * kvh, t, hd),
                Strided::packed(&v, b * kvh, t, hd),
            );
            let (o, p) = self.core.forward(&qs, &ks, &vs)?;
            let o = transpose_heads(&o, [b, t, h, hd], true);
            Ok((
                matmul_wt(&o, wo, n, h * hd, d, Some(x)),
                [hn, q, k, v, p, o],
            ))
        })?;
        self.saved.keep("attention block", saved)?;
        Ok((CpuStorage::F32(y), l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        nw: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let saved = self.saved.get("attention block")?;
        let [hn, q, k, v, p, o] = &*saved;
        let d = nw.elem_count();
        self.check(d)?;
        let [b, t, h, kvh, hd] = self.dims;
        let (n, rep) = (b * t, h / kvh);
        if x.elem_count() != n * d || hn.len() != n * d {
            bail!(
                "attention block backward: input {:?} for {b}×{t} tokens of width {d}",
                x.dims()
            )
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
                let (dq, dk, dv) = self.core.backward(
                    &qs,
                    &ks,
                    &vs,
                    p,
                    &Strided::packed(&go, b * kvh, rep * t, hd),
                )?;
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
pub(crate) fn attention_block(
    x: &Tensor,
    norm_w: &Tensor,
    parts: AttentionBlockParts,
) -> Result<Tensor> {
    ensure_cpu_f32(x, "attention block")?;
    let AttentionBlockParts {
        w,
        sinks,
        cos,
        sin,
        mask,
        dims,
        scale,
        eps,
    } = parts;
    let [b, t, h, kvh, _] = dims;
    if mask.len() != b * t * t || kvh == 0 {
        bail!(
            "attention block: a mask of {} for {b}×{t} tokens",
            mask.len()
        )
    }

    let w = [
        w[0].contiguous()?,
        w[1].contiguous()?,
        w[2].contiguous()?,
        w[3].contiguous()?,
    ];
    let core = Attention::new(mask, scale, [b, t, t], h / kvh * t * kvh);
    x.contiguous()?.apply_op2(
        &norm_w.contiguous()?,
        AttentionBlock {
            eps,
            w,
            sinks,
            cos,
            sin,
            core,
            dims,
            saved: Saved::new(),
        },
    )
}

// ---------------------------------------------------------------------------------------------
// A layer's MLP block in one graph node: x + down(silu(gate(rms(x))) ⊙ up(rms(x))).
//
// Why one node: as six (norm, three products, SwiGLU, residual sum) candle's autograd gave each
// of their inputs a zero-filled gradient and a fresh sum (about 2 M floats per layer and step,
// the largest share of a step's element-wise traffic), and the shared norm output two more.

pub(super) struct MlpBlock {
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
        if self.w[0].dims2()? != (inter, d)
            || self.w[1].dims2()? != (inter, d)
            || self.w[2].dims2()? != (d, inter)
        {
            bail!(
                "mlp: weights {:?} {:?} {:?} for width {d}",
                self.w[0].dims(),
                self.w[1].dims(),
                self.w[2].dims()
            )
        }
        for (w, s) in self.w.iter().zip(&self.sinks) {
            if s.len != w.elem_count() {
                bail!(
                    "mlp: gradient slot of {} for a {:?} weight",
                    s.len,
                    w.dims()
                )
            }
        }
        Ok(inter)
    }
}

/// `dst += src` elementwise, split over the pool in the training pass.
pub(super) fn add_into(dst: &mut [f32], src: &[f32]) {
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

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, "mlp")?;
        let nw = f32_slice(s2, l2, "mlp")?;
        let d = nw.len();
        if l1.dims().last() != Some(&d) {
            bail!(
                "mlp: last dimension of {:?} is not the norm's {d}",
                l1.dims()
            )
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

    fn bwd(
        &self,
        x: &Tensor,
        nw: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let saved = self.saved.get("mlp")?;
        let [hn, gate, up] = &*saved;
        let d = nw.elem_count();
        let inter = self.shapes(d)?;
        let n = x.elem_count() / d.max(1);
        if hn.len() != n * d || gate.len() != n * inter {
            bail!(
                "mlp backward: input {:?} for saved activations of {} rows",
                x.dims(),
                hn.len() / d.max(1)
            )
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
    x.contiguous()?.apply_op2(
        &norm_w.contiguous()?,
        MlpBlock {
            eps,
            w,
            sinks,
            saved: Saved::new(),
        },
    )
}

//! SwiGLU.

use super::*;

// ---------------------------------------------------------------------------------------------
// SwiGLU: silu(gate) ⊙ up.

pub(super) struct SwiGlu;

/// `out[j] = sigmoid(a[j])`, with the vectorised `exp` (libm's scalar `expf` was 2% of a
/// training step here). `exp(−a)` is taken at `min(−a, 88)`, where sigmoid is below 1e-38 anyway.
pub(super) fn sigmoid_into(a: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(a) {
        *o = (-v).min(88.0);
    }
    crate::vexp::exp_in_place(out, 0.0, 1.0);
    for o in out.iter_mut() {
        *o = 1.0 / (1.0 + *o);
    }
}

/// Rows of this many elements at a time through [`sigmoid_into`] (a stack buffer).
pub(super) const SIGMOID_RUN: usize = 256;

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        "fused-swiglu"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let g = f32_slice(s1, l1, "swiglu")?;
        let u = f32_slice(s2, l2, "swiglu")?;
        if l1.shape() != l2.shape() {
            bail!("swiglu: gate {:?} and up {:?} differ", l1.dims(), l2.dims())
        }
        Ok((CpuStorage::F32(swiglu_forward(g, u)), l1.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
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
pub(super) fn swiglu_forward(a: &[f32], b: &[f32]) -> Vec<f32> {
    assert_eq!(a.len(), b.len());
    // Not zeroed first (a serial pass before the parallel one): every element is written below.
    let mut y = Vec::with_capacity(a.len());
    let out = SharedMut(y.as_mut_ptr());
    par_ranges(a.len(), 1 << 15, |range| {
        // SAFETY: each range is written by exactly one worker, within y's capacity.
        let yr = unsafe { out.uninit(range.clone()) };
        let mut s = [0f32; SIGMOID_RUN];
        for ((yr, a), b) in yr
            .chunks_mut(SIGMOID_RUN)
            .zip(a[range.clone()].chunks(SIGMOID_RUN))
            .zip(b[range].chunks(SIGMOID_RUN))
        {
            let s = &mut s[..a.len()];
            sigmoid_into(a, s);
            for (((y, &a), &b), &s) in yr.iter_mut().zip(a).zip(b).zip(s.iter()) {
                y.write(a * s * b);
            }
        }
    });
    // SAFETY: the ranges cover 0..a.len(), and each element of a range was written above.
    unsafe { y.set_len(a.len()) };
    y
}

/// Gradients `(da, db)` of [`swiglu_forward`] for the output gradient `g`, and with `want_act`
/// the forward output too (one sigmoid pass for both).
///
/// d silu(a)/da = s·(1 + a·(1 − s)) with s = sigmoid(a).
pub(super) fn swiglu_backward(
    a: &[f32],
    b: &[f32],
    gs: &[f32],
    want_act: bool,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = a.len();
    assert!(b.len() == n && gs.len() == n);
    // Not zeroed first (serial passes before the parallel one): every element is written below.
    let mut da = Vec::with_capacity(n);
    let mut db = Vec::with_capacity(n);
    let mut act = Vec::with_capacity(if want_act { n } else { 0 });
    let (pa, pb, py) = (
        SharedMut(da.as_mut_ptr()),
        SharedMut(db.as_mut_ptr()),
        SharedMut(act.as_mut_ptr()),
    );
    par_ranges(n, 1 << 15, |range| {
        // SAFETY: each range is written by exactly one worker, within the buffers' capacity
        // (`act` only when it has the room).
        let (da, db) = unsafe { (pa.uninit(range.clone()), pb.uninit(range.clone())) };
        let mut act = want_act.then(|| unsafe { py.uninit(range.clone()) });
        let mut sig = [0f32; SIGMOID_RUN];
        let start = range.start;
        for (c, a) in a[range].chunks(SIGMOID_RUN).enumerate() {
            let sig = &mut sig[..a.len()];
            sigmoid_into(a, sig);
            let off = c * SIGMOID_RUN;
            for (j, (&a, &s)) in a.iter().zip(sig.iter()).enumerate() {
                let (k, i) = (off + j, start + off + j);
                db[k].write(gs[i] * a * s);
                da[k].write(gs[i] * b[i] * s * (1.0 + a * (1.0 - s)));
                if let Some(y) = act.as_deref_mut() {
                    y[k].write(a * s * b[i]);
                }
            }
        }
    });
    // SAFETY: the ranges cover 0..n, and each element of a range was written above (`act`
    // when wanted).
    unsafe {
        da.set_len(n);
        db.set_len(n);
        if want_act {
            act.set_len(n);
        }
    }
    (da, db, act)
}

/// `silu(gate) ⊙ up` (same shapes).
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    ensure_cpu_f32(gate, "swiglu")?;
    gate.contiguous()?.apply_op2(&up.contiguous()?, SwiGlu)
}

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
//!
//! * `linear` — `x·wᵀ` through gemm, gradient slots, and the gemm the training pass splits
//!   over its pool (`crate::pool`).
//! * `attention` — strided batched matmul, RoPE with the head transpose, masked softmax, and
//!   attention as one node.
//! * `norm`, `swiglu`, `embedding`, `loss` — RMSNorm, SwiGLU, the lookup, the weighted
//!   cross-entropy.
//! * `blocks` — a layer's attention block and MLP block as one node each (the training pass).
//! * `optim` — the in-place AdamW step, accumulation, and the gradient norm's sums of squares.

use std::ops::Range;
use std::sync::Mutex;

use candle_core::{
    bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, InplaceOp2, Layout, Result, Shape,
    Tensor,
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

/// A raw pointer that worker threads may write through, each to its own disjoint range (or
/// element).
#[derive(Clone, Copy)]
struct SharedMut<T = f32>(*mut T);
// SAFETY: only ever used to write disjoint ranges or elements from parallel tasks.
unsafe impl<T> Send for SharedMut<T> {}
unsafe impl<T> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// # Safety
    /// `range` must be in bounds and no other thread may touch it concurrently.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, range: Range<usize>) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.0.add(range.start), range.len())
    }

    /// [`SharedMut::slice`] of a buffer's spare capacity, to be written before it is read
    /// (outputs filled by a parallel loop need no zeroing pass first).
    ///
    /// # Safety
    /// As [`SharedMut::slice`], within the buffer's capacity.
    #[allow(clippy::mut_from_ref)]
    unsafe fn uninit(&self, range: Range<usize>) -> &mut [std::mem::MaybeUninit<T>] {
        std::slice::from_raw_parts_mut(self.0.add(range.start).cast(), range.len())
    }

    /// # Safety
    /// `i` must be in bounds (of an initialised buffer) and no other thread may touch element
    /// `i` concurrently.
    unsafe fn write(&self, i: usize, v: T) {
        *self.0.add(i) = v;
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
    (0..n.div_ceil(chunk))
        .into_par_iter()
        .for_each(|c| f(c * chunk..n.min((c + 1) * chunk)));
}

fn ensure_cpu_f32(t: &Tensor, op: &str) -> Result<()> {
    if !t.device().is_cpu() || t.dtype() != DType::F32 {
        bail!("{op}: fused ops are f32 on the CPU only")
    }
    Ok(())
}

mod attention;
mod blocks;
mod embedding;
mod linear;
mod loss;
mod norm;
mod optim;
mod swiglu;

pub use attention::*;
pub(crate) use blocks::*;
pub(crate) use embedding::*;
pub use linear::*;
pub use loss::*;
pub use norm::*;
pub(crate) use optim::*;
pub use swiglu::*;

/// What an op's forward pass keeps for its backward pass (the op is applied once per graph).
struct Saved<T>(Mutex<Option<std::sync::Arc<T>>>);

impl<T> Saved<T> {
    fn new() -> Saved<T> {
        Saved(Mutex::new(None))
    }

    fn keep(&self, op: &str, v: T) -> Result<()> {
        *self
            .0
            .lock()
            .map_err(|_| candle_core::Error::Msg(format!("{op}: poisoned")))? =
            Some(std::sync::Arc::new(v));
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

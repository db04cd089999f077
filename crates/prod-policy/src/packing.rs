//! gemm's packing thresholds, a process-wide setting: gemm's defaults for sampling, the
//! training pass's own while the training pool runs (it changes speed only, never results).
//! Its own module because the training pool sets it when it starts and the matrix products
//! (and their rate measurement) read and restore it.

/// gemm's packing thresholds (process-wide): (lhs single-threaded, rhs).
pub(crate) type Packing = (usize, usize);

/// gemm 0.19's defaults on x86-64.
pub(crate) const DEFAULT_PACKING: Packing = (8, 2);

/// Operands already laid out along the microkernel's vectors are not copied into packed
/// panels first. Why: a training pass's products are skinny (one side is the micro-batch's
/// tokens), every weight comes from memory rather than cache, and copying it into panels cost
/// more than it saved: with these thresholds a step at SmolLM2-135M's shape took 2–3% less at
/// 256 tokens, and as long or less at 2,048; sampling and a 1,000-token prefill were unchanged.
pub(crate) const TRAINING_PACKING: Packing = (256, 256);

pub(crate) fn set_packing((lhs, rhs): Packing) {
    gemm::set_lhs_packing_threshold_single_thread(lhs);
    gemm::set_rhs_packing_threshold(rhs);
}

pub(crate) fn packing() -> Packing {
    (
        gemm::get_lhs_packing_threshold_single_thread(),
        gemm::get_rhs_packing_threshold(),
    )
}

/// Sets gemm's packing for training products ([`TRAINING_PACKING`]); called when the training
/// pool starts. It changes speed only, never results.
pub(crate) fn pack_for_training() {
    set_packing(TRAINING_PACKING);
}

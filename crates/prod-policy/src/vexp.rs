//! `exp` over slices, 16 lanes at a time where the CPU has AVX-512. The softmax over keys and
//! the cross-entropy over the vocabulary call `exp` once per score: at a 1,000-token prompt
//! libm's scalar `expf` was 40% of a prefill. Arguments are at most 88.7 (every caller passes
//! `value − max` or `logit − logsumexp`, which are ≤ 0); below −103.97 the result is 0, as
//! `expf`'s; NaN stays NaN. Accuracy: a few ulp (Cephes' polynomial), tested against f64.

use std::mem::MaybeUninit;

/// `dst[j] = scale · exp(src[j] − shift)`; returns `Σ exp(src[j] − shift)`.
pub(crate) fn exp_into(src: &[f32], dst: &mut [f32], shift: f32, scale: f32) -> f32 {
    assert_eq!(src.len(), dst.len());
    // SAFETY: both slices hold `src.len()` elements.
    unsafe { exp_raw(src.as_ptr(), dst.as_mut_ptr(), src.len(), shift, scale) }
}

/// `v[j] = scale · exp(v[j] − shift)`; returns `Σ exp(v[j] − shift)`.
pub(crate) fn exp_in_place(v: &mut [f32], shift: f32, scale: f32) -> f32 {
    let p = v.as_mut_ptr();
    // SAFETY: each element is read before it is written, by the same iteration.
    unsafe { exp_raw(p, p, v.len(), shift, scale) }
}

/// `Σ exp(src[j] − shift)`.
pub(crate) fn exp_sum(src: &[f32], shift: f32) -> f32 {
    // SAFETY: `src.len()` elements; nothing is written.
    unsafe { exp_raw(src.as_ptr(), std::ptr::null_mut(), src.len(), shift, 1.0) }
}

/// `out[j] = x[j] · scale + add[j]`; returns the largest `out[j]` (the masked scores of a
/// softmax row and their maximum, in one pass) and `out`, now initialised.
pub(crate) fn scale_add_max<'o>(
    x: &[f32],
    add: &[f32],
    scale: f32,
    out: &'o mut [MaybeUninit<f32>],
) -> (f32, &'o mut [f32]) {
    assert!(x.len() == out.len() && add.len() == out.len());
    let max = scale_add_max_into(x, add, scale, out);
    // SAFETY: every element of `out` was written above.
    (max, unsafe {
        std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<f32>(), out.len())
    })
}

fn scale_add_max_into(x: &[f32], add: &[f32], scale: f32, out: &mut [MaybeUninit<f32>]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::decode::available() {
            // SAFETY: the CPU has AVX-512F; the three slices hold `out.len()` elements.
            return unsafe { scale_add_max_avx512(x, add, scale, out) };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for ((o, &v), &a) in out.iter_mut().zip(x).zip(add) {
        let y = v * scale + a;
        o.write(y);
        max = max.max(y);
    }
    max
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn scale_add_max_avx512(
    x: &[f32],
    add: &[f32],
    scale: f32,
    out: &mut [MaybeUninit<f32>],
) -> f32 {
    use std::arch::x86_64::*;
    let n = out.len();
    let sc = _mm512_set1_ps(scale);
    let mut acc = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut j = 0;
    while j < n {
        let left = n - j;
        let mask: __mmask16 = if left >= 16 {
            0xffff
        } else {
            (1u16 << left) - 1
        };
        let v = _mm512_fmadd_ps(
            _mm512_maskz_loadu_ps(mask, x.as_ptr().add(j)),
            sc,
            _mm512_maskz_loadu_ps(mask, add.as_ptr().add(j)),
        );
        _mm512_mask_storeu_ps(out.as_mut_ptr().add(j).cast::<f32>(), mask, v);
        acc = _mm512_mask_max_ps(acc, mask, acc, v);
        j += 16;
    }
    _mm512_reduce_max_ps(acc)
}

/// # Safety
/// `src` (and `dst` unless null) must hold `n` elements; `dst` may equal `src`.
unsafe fn exp_raw(src: *const f32, dst: *mut f32, n: usize, shift: f32, scale: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::decode::available() {
            return avx512(src, dst, n, shift, scale);
        }
    }
    let mut sum = 0f32;
    for j in 0..n {
        let d = *src.add(j) - shift;
        let e = if d < -104.0 { 0.0 } else { d.exp() };
        sum += e;
        if !dst.is_null() {
            *dst.add(j) = scale * e;
        }
    }
    sum
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512(src: *const f32, dst: *mut f32, n: usize, shift: f32, scale: f32) -> f32 {
    use std::arch::x86_64::*;
    let (sh, sc) = (_mm512_set1_ps(shift), _mm512_set1_ps(scale));
    let mut acc = _mm512_setzero_ps();
    let mut j = 0;
    while j < n {
        let left = n - j;
        let mask: __mmask16 = if left >= 16 {
            0xffff
        } else {
            (1u16 << left) - 1
        };
        let x = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, src.add(j)), sh);
        let e = exp16(x);
        acc = _mm512_mask_add_ps(acc, mask, acc, e);
        if !dst.is_null() {
            _mm512_mask_storeu_ps(dst.add(j), mask, _mm512_mul_ps(e, sc));
        }
        j += 16;
    }
    _mm512_reduce_add_ps(acc)
}

/// exp of 16 lanes: `2^k · p(r)` with `x = k·ln 2 + r`, |r| ≤ ln 2 / 2 (Cephes `expf`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp16(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // The constant first: max/min return their second operand when either is NaN.
    let x0 = x;
    let x = _mm512_max_ps(_mm512_set1_ps(-104.0), x);
    let x = _mm512_min_ps(_mm512_set1_ps(88.7), x);
    let k = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let y = _mm512_fmadd_ps(
        p,
        _mm512_mul_ps(r, r),
        _mm512_add_ps(r, _mm512_set1_ps(1.0)),
    );
    // Exactly 0 where the clamp acted (NaN compares false and stays NaN).
    let tiny = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x0, _mm512_set1_ps(-104.0));
    _mm512_maskz_mov_ps(!tiny, _mm512_scalef_ps(y, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against f64 `exp` over the range softmax uses, around the lane tail, and at the edges.
    #[test]
    fn exp_matches_f64_to_a_few_ulp() {
        let xs: Vec<f32> = (0..20_000)
            .map(|i| -110.0 + i as f32 * 0.006)
            .chain([0.0, -0.0, 1e-8, -87.3, -103.97, -104.0])
            .collect();
        for len in [xs.len(), 1, 15, 16, 17, 33] {
            let src = &xs[..len];
            let mut dst = vec![0f32; len];
            let sum = exp_into(src, &mut dst, 0.0, 2.0);
            let mut want_sum = 0f64;
            for (&x, &y) in src.iter().zip(&dst) {
                let want = (x as f64).exp();
                want_sum += if x < -104.0 { 0.0 } else { want };
                if x < -104.0 {
                    assert_eq!(y, 0.0, "exp({x})");
                } else if x < -103.9 {
                    assert!(y <= 2.0 * 1.5e-45, "exp({x}) = {y}");
                } else if want > 1e-37 {
                    let rel = ((y as f64 / 2.0) - want).abs() / want;
                    assert!(rel < 4e-7, "exp({x}): {} vs {want} (rel {rel})", y / 2.0);
                }
            }
            assert!(
                ((sum as f64) - want_sum).abs() <= 1e-6 * want_sum.max(1e-30),
                "sum {sum} vs {want_sum}"
            );
            assert_eq!(exp_sum(src, 0.0), sum);
            let mut v = src.to_vec();
            assert_eq!(exp_in_place(&mut v, 0.0, 2.0), sum);
            assert_eq!(v, dst);
        }
        // Scores and their maximum, around the lane tail.
        for len in [1usize, 15, 16, 17, 40] {
            let x: Vec<f32> = (0..len).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            let add: Vec<f32> = (0..len)
                .map(|i| if i % 3 == 0 { -1e30 } else { 0.5 })
                .collect();
            let mut buf: Vec<f32> = Vec::with_capacity(len);
            let (max, out) = scale_add_max(&x, &add, 0.25, &mut buf.spare_capacity_mut()[..len]);
            let out = out.to_vec();
            let want: Vec<f32> = x.iter().zip(&add).map(|(v, a)| v * 0.25 + a).collect();
            assert_eq!(out, want);
            assert_eq!(max, want.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        }
        // The top of the domain.
        let mut top = [88.0f32, 88.7];
        exp_in_place(&mut top, 0.0, 1.0);
        assert!(
            (top[0] as f64 / 88f64.exp() - 1.0).abs() < 4e-7 && top[1].is_finite(),
            "{top:?}"
        );
        // Shifted, and NaN propagates.
        let mut v = vec![3.0f32, 1.0, f32::NAN];
        let s = exp_in_place(&mut v, 3.0, 1.0);
        assert!(
            (v[0] - 1.0).abs() < 1e-7
                && (v[1] - (-2f32).exp()).abs() < 1e-7
                && v[2].is_nan()
                && s.is_nan()
        );
    }
}

//! The row loop compiled for NEON (aarch64's baseline, so the element-wise
//! loops are the portable build's: LLVM vectorizes them, 4 lanes). As on x86,
//! the f64 sum of f32 data is spelled out: LLVM may not reorder it.
use std::arch::aarch64::*;

use super::{row, shifted_sums, Activation, RowParams};

#[target_feature(enable = "neon")]
pub(super) unsafe fn row_neon(x: &[f32], y: &mut [f32], p: &RowParams, act: Activation) {
    row(x, y, p, act, |x, k| unsafe { sums_neon(x, k) })
}

/// [`shifted_sums`], 8 elements per step in four pairs of f64 accumulators
/// (two lanes each): the f32 halves widen with `fcvtl`/`fcvtl2`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn sums_neon(x: &[f32], k: f64) -> (f64, f64) {
    let kv = vdupq_n_f64(k);
    let mut s = [vdupq_n_f64(0.0); 4];
    let mut q = [vdupq_n_f64(0.0); 4];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        let lo = vld1q_f32(c.as_ptr());
        let hi = vld1q_f32(c.as_ptr().add(4));
        let d = [
            vsubq_f64(vcvt_f64_f32(vget_low_f32(lo)), kv),
            vsubq_f64(vcvt_high_f64_f32(lo), kv),
            vsubq_f64(vcvt_f64_f32(vget_low_f32(hi)), kv),
            vsubq_f64(vcvt_high_f64_f32(hi), kv),
        ];
        for j in 0..4 {
            s[j] = vaddq_f64(s[j], d[j]);
            q[j] = vfmaq_f64(q[j], d[j], d[j]);
        }
    }
    let (ts, tq) = shifted_sums(chunks.remainder(), k);
    let sum =
        |v: [float64x2_t; 4]| vaddvq_f64(vaddq_f64(vaddq_f64(v[0], v[1]), vaddq_f64(v[2], v[3])));
    (sum(s) + ts, sum(q) + tq)
}

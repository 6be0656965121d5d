//! The LSTM's aarch64 code: the recurrent mat-vec products and the cell update
//! with NEON.
use std::arch::aarch64::*;

use super::NB;

/// `S` sequences share each load of the weights: a panel goes in parts of
/// `4 * Q` gates, with `S * Q` accumulators (16, 16, 12 and 16 of the 32
/// vector registers for `S` = 1..4), the weights streaming through the rest
/// beside one register of four `h` values per sequence (`k` advances by four,
/// `vfmaq_laneq_f32` picks the lane).
///
/// Every gate sums as `init`, then `+ w[k] * h[k]` fused, for `k` in order,
/// whatever `S` and `Q`: one chain per lane (12 to 16 independent chains in
/// a part, enough to cover the FMA latency), so a sequence gives the same
/// bits alone or beside others in a batch.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "neon")]
pub(super) unsafe fn matvec<const S: usize, const Q: usize>(
    w: *const f32,
    hidden: usize,
    panels: usize,
    init: [*const f32; S],
    h: [*const f32; S],
    out: [*mut f32; S],
) {
    const { assert!(NB.is_multiple_of(4 * Q)) };
    for p in 0..panels {
        let wp = w.add(p * hidden * NB);
        for part in (0..NB).step_by(4 * Q) {
            let mut acc = [[vdupq_n_f32(0.0); Q]; S];
            for s in 0..S {
                for q in 0..Q {
                    acc[s][q] = vld1q_f32(init[s].add(p * NB + part + 4 * q));
                }
            }
            let mut k = 0;
            while k + 4 <= hidden {
                let x: [float32x4_t; S] = std::array::from_fn(|s| vld1q_f32(h[s].add(k)));
                step::<S, Q, 0>(&mut acc, wp.add(k * NB + part), &x);
                step::<S, Q, 1>(&mut acc, wp.add((k + 1) * NB + part), &x);
                step::<S, Q, 2>(&mut acc, wp.add((k + 2) * NB + part), &x);
                step::<S, Q, 3>(&mut acc, wp.add((k + 3) * NB + part), &x);
                k += 4;
            }
            while k < hidden {
                let x: [float32x4_t; S] = std::array::from_fn(|s| vdupq_n_f32(*h[s].add(k)));
                step::<S, Q, 0>(&mut acc, wp.add(k * NB + part), &x);
                k += 1;
            }
            for s in 0..S {
                for q in 0..Q {
                    vst1q_f32(out[s].add(p * NB + part + 4 * q), acc[s][q]);
                }
            }
        }
    }
}

/// `acc[s] += row * x[s][L]` (fused) for the `4 * Q` gates of one weight row.
#[inline(always)]
unsafe fn step<const S: usize, const Q: usize, const L: i32>(
    acc: &mut [[float32x4_t; Q]; S],
    row: *const f32,
    x: &[float32x4_t; S],
) {
    for q in 0..Q {
        let wv = vld1q_f32(row.add(4 * q));
        for (a, x) in acc.iter_mut().zip(x) {
            a[q] = vfmaq_laneq_f32::<L>(a[q], wv, *x);
        }
    }
}

/// Writes the transpose of the 4x4 block at `src` (row stride `ss`) to `dst`
/// (row stride `ds`).
#[target_feature(enable = "neon")]
pub(in crate::lstm) unsafe fn transpose4(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    let r0 = vld1q_f32(src);
    let r1 = vld1q_f32(src.add(ss));
    let r2 = vld1q_f32(src.add(2 * ss));
    let r3 = vld1q_f32(src.add(3 * ss));
    // Pairs of rows interleaved, then their 64-bit halves.
    let t0 = vtrn1q_f32(r0, r1);
    let t1 = vtrn2q_f32(r0, r1);
    let t2 = vtrn1q_f32(r2, r3);
    let t3 = vtrn2q_f32(r2, r3);
    let c0 = vreinterpretq_f32_f64(vtrn1q_f64(
        vreinterpretq_f64_f32(t0),
        vreinterpretq_f64_f32(t2),
    ));
    let c1 = vreinterpretq_f32_f64(vtrn1q_f64(
        vreinterpretq_f64_f32(t1),
        vreinterpretq_f64_f32(t3),
    ));
    let c2 = vreinterpretq_f32_f64(vtrn2q_f64(
        vreinterpretq_f64_f32(t0),
        vreinterpretq_f64_f32(t2),
    ));
    let c3 = vreinterpretq_f32_f64(vtrn2q_f64(
        vreinterpretq_f64_f32(t1),
        vreinterpretq_f64_f32(t3),
    ));
    vst1q_f32(dst, c0);
    vst1q_f32(dst.add(ds), c1);
    vst1q_f32(dst.add(2 * ds), c2);
    vst1q_f32(dst.add(3 * ds), c3);
}

/// NEON is aarch64's baseline: this is `cell_body` as the portable build
/// compiles it (LLVM vectorizes its loop, 4 lanes), an arm of its own in the table.
#[target_feature(enable = "neon")]
pub(super) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
    super::cell_body(g, c, h)
}

//! The Winograd convolution's aarch64 code: the job compiled for NEON with
//! its transforms' products (`kernel.rs`), and the NEON shuffles between tiles
//! and lanes (`lanes.rs`).
use std::arch::aarch64::*;

use super::kernel::sized;
use super::{Call, Job, LANES};
use crate::job::JobError;
use crate::scratch::Scratch;

// NEON: the transforms' products as sums of outer products, eight lanes
// (two vectors of tiles) per pass: for each input `j` in turn, its two
// vectors times column `j` of the matrix (`vfmaq_laneq_f32`, four
// coefficients per register) into all `R` x 2 accumulators (24 at most, for
// `A` = 12), so each input and each coefficient is loaded once per pass.

#[target_feature(enable = "neon")]
pub(super) unsafe fn job(
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> Result<(), JobError> {
    sized::<true, true>(call, job, s, par)
}

/// Vectors of four lanes per pass.
const V: usize = 2;

/// `kernel.rs`'s `mat_vec` with `FMA`, from the matrix's columns.
#[inline(always)]
pub(super) unsafe fn mat_vec<const R: usize, const C: usize>(
    cols: &[[f32; R]; C],
    vecs: &[[f32; LANES]; C],
    mut emit: impl FnMut(usize, usize, &[f32]),
) {
    for k0 in (0..LANES).step_by(4 * V) {
        let mut acc = [[vdupq_n_f32(0.0); V]; R];
        for (col, vec) in cols.iter().zip(vecs) {
            let x: [float32x4_t; V] =
                std::array::from_fn(|v| vld1q_f32(vec.as_ptr().add(k0 + 4 * v)));
            let mut i = 0;
            while i + 4 <= R {
                let cf = vld1q_f32(col.as_ptr().add(i));
                lane::<0>(&mut acc[i], &x, cf);
                lane::<1>(&mut acc[i + 1], &x, cf);
                lane::<2>(&mut acc[i + 2], &x, cf);
                lane::<3>(&mut acc[i + 3], &x, cf);
                i += 4;
            }
            if i + 2 <= R {
                let cf = vld1_f32(col.as_ptr().add(i));
                for (v, xv) in x.iter().enumerate() {
                    acc[i][v] = vfmaq_lane_f32::<0>(acc[i][v], *xv, cf);
                    acc[i + 1][v] = vfmaq_lane_f32::<1>(acc[i + 1][v], *xv, cf);
                }
                i += 2;
            }
            if i < R {
                for (a, xv) in acc[i].iter_mut().zip(&x) {
                    *a = vfmaq_n_f32(*a, *xv, col[i]);
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            let mut vals = [0.0f32; 4 * V];
            for (v, a) in a.iter().enumerate() {
                vst1q_f32(vals.as_mut_ptr().add(4 * v), *a);
            }
            emit(i, k0, &vals);
        }
    }
}

/// `acc[v] += x[v] * cf[L]`, fused.
#[inline(always)]
unsafe fn lane<const L: i32>(acc: &mut [float32x4_t; V], x: &[float32x4_t; V], cf: float32x4_t) {
    for (a, xv) in acc.iter_mut().zip(x) {
        *a = vfmaq_laneq_f32::<L>(*a, *xv, cf);
    }
}

// The lane shuffles (`lanes.rs`).

// Per four tiles (one vector of each row): `ld2`/`ld4` de-interleave
// by 2 and 4 directly. For 6, `ld3` of the first two tiles and of the
// next two gives `A[i]`, `B[i]` (positions i of each half-tile, i < 3);
// row i is the even lanes of (A[i], B[i]) and row i + 3 the odd ones.
// `merge` runs the same steps backwards (`zip`, `st3`).

/// `Some(rows)` for `M` in {2, 4, 6}; `flat` has `LANES * M` values.
#[inline(always)]
pub(super) unsafe fn split<const M: usize>(flat: &[f32]) -> Option<[[f32; LANES]; M]> {
    let mut rows = [[0.0f32; LANES]; M];
    let src = flat.as_ptr();
    let mut row =
        |i: usize, t: usize, v: float32x4_t| vst1q_f32(rows[i].as_mut_ptr().add(4 * t), v);
    for t in 0..LANES / 4 {
        let at = src.add(4 * M * t);
        match M {
            2 => {
                let v = vld2q_f32(at);
                row(0, t, v.0);
                row(1, t, v.1);
            }
            4 => {
                let v = vld4q_f32(at);
                row(0, t, v.0);
                row(1, t, v.1);
                row(2, t, v.2);
                row(3, t, v.3);
            }
            6 => {
                let a = vld3q_f32(at);
                let b = vld3q_f32(at.add(12));
                for (i, (a, b)) in [(a.0, b.0), (a.1, b.1), (a.2, b.2)].into_iter().enumerate() {
                    row(i, t, vuzp1q_f32(a, b));
                    row(i + 3, t, vuzp2q_f32(a, b));
                }
            }
            _ => return None,
        }
    }
    Some(rows)
}

/// `true` (done) for `M` in {2, 4, 6}; `flat` has `LANES * M` values.
#[inline(always)]
pub(super) unsafe fn merge<const M: usize>(
    rows: &[[f32; LANES]; M],
    add: f32,
    flat: &mut [f32],
) -> bool {
    if !matches!(M, 2 | 4 | 6) {
        return false;
    }
    let add = vdupq_n_f32(add);
    let dst = flat.as_mut_ptr();
    for t in 0..LANES / 4 {
        let r = |i: usize| vaddq_f32(vld1q_f32(rows[i].as_ptr().add(4 * t)), add);
        let at = dst.add(4 * M * t);
        match M {
            2 => vst2q_f32(at, float32x4x2_t(r(0), r(1))),
            4 => vst4q_f32(at, float32x4x4_t(r(0), r(1), r(2), r(3))),
            _ => {
                let (r0, r1, r2) = (r(0), r(1), r(2));
                let (r3, r4, r5) = (r(3), r(4), r(5));
                let a = float32x4x3_t(vzip1q_f32(r0, r3), vzip1q_f32(r1, r4), vzip1q_f32(r2, r5));
                let b = float32x4x3_t(vzip2q_f32(r0, r3), vzip2q_f32(r1, r4), vzip2q_f32(r2, r5));
                vst3q_f32(at, a);
                vst3q_f32(at.add(12), b);
            }
        }
    }
    true
}

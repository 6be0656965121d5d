//! The aarch64 inner loop: BFDOT (FEAT_BF16: Neoverse V1/V2, QEMU's `max`).
//! rustc 1.96 has no stable intrinsic for it, so it is one `asm!` line.
//!
//! As the int8 loop (`gemm/int8/arm.rs`), the 8 x 32 tile walks in four 8 x 8
//! quarters of 16 accumulators. BFDOT adds each lane's two bf16 products to
//! its f32 sum as VDPBF16PS does, with Arm's rounding for it (round to odd,
//! denormals flushed, where FPCR.EBF is 0): a few f32 ulps per step, the
//! contract of the x86 loop (`tests.rs`).
use std::arch::aarch64::*;
use std::arch::asm;

use super::{MR, NR};

/// Columns of a quarter.
const QC: usize = 8;

/// `acc += b.pairs · a.2h[L]`: each f32 lane of `acc` gets the two products
/// of its pair of `b` with the pair in lane `L` of `a`.
#[inline(always)]
unsafe fn bfdot<const L: i32>(mut acc: float32x4_t, b: uint32x4_t, a: uint32x4_t) -> float32x4_t {
    asm!("bfdot {0:v}.4s, {1:v}.8h, {2:v}.2h[{l}]", inout(vreg) acc, in(vreg) b, in(vreg) a,
         l = const L, options(pure, nomem, nostack, preserves_flags));
    acc
}

/// The `MR x NR` tile over `kq` pairs: per pair and quarter, two B vectors
/// (4 columns each) and A's 8 pairs as two vectors, 16 dot products by lane;
/// then the sums stored into C, or added to it.
#[target_feature(enable = "bf16")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile_bfdot(
    kq: usize,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    for h in 0..cols.div_ceil(QC) {
        let mut acc = [[vdupq_n_f32(0.0); 2]; MR];
        for q in 0..kq {
            let (bq, aq) = (b.add(q * NR + h * QC), a.add(q * MR));
            let (b0, b1) = (vld1q_u32(bq), vld1q_u32(bq.add(4)));
            let (a0, a1) = (vld1q_u32(aq), vld1q_u32(aq.add(4)));
            // Row r's pair is lane r % 4 of a0 (rows 0-3) or a1 (rows 4-7).
            macro_rules! rows {
                ($($r:literal $v:ident $l:literal),*) => {$(
                    acc[$r][0] = bfdot::<$l>(acc[$r][0], b0, $v);
                    acc[$r][1] = bfdot::<$l>(acc[$r][1], b1, $v);
                )*};
            }
            rows!(0 a0 0, 1 a0 1, 2 a0 2, 3 a0 3, 4 a1 0, 5 a1 1, 6 a1 2, 7 a1 3);
        }
        for (r, sums) in acc.iter().enumerate().take(rows) {
            for (v, &s) in sums.iter().enumerate() {
                let j = h * QC + 4 * v;
                if j >= cols {
                    break;
                }
                let dst = c.add(r * ldc + j);
                if j + 4 <= cols {
                    let x = if accumulate {
                        vaddq_f32(vld1q_f32(dst), s)
                    } else {
                        s
                    };
                    vst1q_f32(dst, x);
                } else {
                    let mut lanes = [0f32; 4];
                    vst1q_f32(lanes.as_mut_ptr(), s);
                    for (l, &x) in lanes.iter().enumerate().take(cols - j) {
                        let d = dst.add(l);
                        *d = if accumulate { *d + x } else { x };
                    }
                }
            }
        }
    }
}

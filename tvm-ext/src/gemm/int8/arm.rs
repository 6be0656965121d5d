//! The aarch64 inner loops: SDOT (`dotprod`: Cortex-A76 / Pi 5, Neoverse N1)
//! and USMMLA (`i8mm`: Neoverse V1/V2). rustc 1.96 has no stable intrinsics
//! for either, so each instruction is one `asm!` line; the loads, shuffles and
//! the epilogue are stable NEON intrinsics.
//!
//! The 8 x 32 tile does not fit NEON's 32 registers (64 vectors of 4 sums), so
//! both loops walk it as four 8 x 8 quarters, 16 accumulators each, every
//! quarter over all of K (A's panel is read four times, from L1).
use std::arch::aarch64::*;
use std::arch::asm;

use super::{Tile, Walk, MR};

/// Columns of a quarter.
const QC: usize = 8;

/// `acc += dot4(b, a.4b[L])`, signed bytes: each lane of `acc` gets the dot
/// product of its four bytes of `b` with the quad in lane `L` of `a`.
#[inline(always)]
unsafe fn sdot<const L: i32>(mut acc: int32x4_t, b: int8x16_t, a: int8x16_t) -> int32x4_t {
    asm!("sdot {0:v}.4s, {1:v}.16b, {2:v}.4b[{l}]", inout(vreg) acc, in(vreg) b, in(vreg) a,
         l = const L, options(pure, nomem, nostack, preserves_flags));
    acc
}

/// `acc (2x2) += u (2x8, unsigned) · s (2x8, signed)^T`, row-major.
#[inline(always)]
unsafe fn usmmla(mut acc: int32x4_t, u: int8x16_t, s: int8x16_t) -> int32x4_t {
    asm!("usmmla {0:v}.4s, {1:v}.16b, {2:v}.16b", inout(vreg) acc, in(vreg) u, in(vreg) s,
         options(pure, nomem, nostack, preserves_flags));
    acc
}

/// B's quads in the walk's order, as offsets into the panel: counted, not
/// divided out of the quad's index (a UDIV per quad costs more than its
/// SDOTs), in one loop (over taps and quads in two, LLVM stored the
/// accumulators to the stack on every quad).
struct Quads {
    walk: Walk,
    /// Quads left in this tap, where this tap starts, the next quad.
    left: usize,
    tap_start: usize,
    at: usize,
}

impl Quads {
    fn new(walk: &Walk, offset: usize) -> Self {
        Quads {
            walk: *walk,
            left: walk.per_tap,
            tap_start: offset,
            at: offset,
        }
    }

    /// The next quad's offset.
    #[inline(always)]
    fn next(&mut self) -> usize {
        let at = self.at;
        self.left -= 1;
        if self.left == 0 {
            self.left = self.walk.per_tap;
            self.tap_start += self.walk.tap_step;
            self.at = self.tap_start;
        } else {
            self.at += self.walk.quad_step;
        }
        at
    }
}

#[inline(always)]
unsafe fn load(p: *const u32) -> int8x16_t {
    vreinterpretq_s8_u32(vld1q_u32(p))
}

/// The `MR x NR` tile with SDOT: per quad and quarter, two B vectors (4
/// columns each) and A's 8 quads as two vectors, 16 dot products by lane.
///
/// SDOT multiplies signed bytes, so the unsigned operand (A when `A_U8`, else
/// B) has its top bit flipped (`u ^ 0x80 = u - 128` as s8). The sums are then
/// short by `-128 * Σ weights`, which the epilogue folds into the zero point:
/// `Σ(u - 128) w - (z - 128) Σw = Σ u w - z Σw`. Exact (mod 2^32, and the
/// true value fits) as long as the weights' offsets are their sums over K,
/// the contract of [`super::Scales`].
#[target_feature(enable = "dotprod")]
pub(super) unsafe fn tile_sdot<const A_U8: bool>(
    walk: &Walk,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    accumulate: bool,
) {
    let flip = vdupq_n_s8(-128);
    for h in 0..t.cols.div_ceil(QC) {
        let mut acc = [[vdupq_n_s32(0); 2]; MR];
        let mut quads = Quads::new(walk, h * QC);
        for q in 0..walk.taps * walk.per_tap {
            let (bq, aq) = (b.add(quads.next()), a.add(q * MR));
            let (mut b0, mut b1) = (load(bq), load(bq.add(4)));
            let (mut a0, mut a1) = (load(aq), load(aq.add(4)));
            if A_U8 {
                (a0, a1) = (veorq_s8(a0, flip), veorq_s8(a1, flip));
            } else {
                (b0, b1) = (veorq_s8(b0, flip), veorq_s8(b1, flip));
            }
            // Row r's quad is lane r % 4 of a0 (rows 0-3) or a1 (rows 4-7).
            macro_rules! rows {
                ($($r:literal $v:ident $l:literal),*) => {$(
                    acc[$r][0] = sdot::<$l>(acc[$r][0], b0, $v);
                    acc[$r][1] = sdot::<$l>(acc[$r][1], b1, $v);
                )*};
            }
            rows!(0 a0 0, 1 a0 1, 2 a0 2, 3 a0 3, 4 a1 0, 5 a1 1, 6 a1 2, 7 a1 3);
        }
        let (row_fix, col_fix) = if A_U8 { (128, 0) } else { (0, 128) };
        epilogue(&acc, h, row_fix, col_fix, c, ldc, t, accumulate);
    }
}

/// The `MR x NR` tile with USMMLA (u8 x s8, no flip): per pair of quads (8
/// of K) and quarter, A's rows zipped into four 2x8 row pairs, B's columns into
/// four 2x8 column pairs, 16 2x2 products of 32 multiply-adds each. Where B is
/// the unsigned operand the product comes out transposed (columns x rows) and
/// the epilogue's unzip puts it back.
#[target_feature(enable = "i8mm")]
pub(super) unsafe fn tile_usmmla<const A_U8: bool>(
    walk: &Walk,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    accumulate: bool,
) {
    let kq = walk.taps * walk.per_tap;
    let zero = vdupq_n_u32(0);
    for h in 0..t.cols.div_ceil(QC) {
        // acc[i][j]: rows 2i, 2i+1 by columns 2j, 2j+1.
        let mut acc = [[vdupq_n_s32(0); 4]; 4];
        let mut quads = Quads::new(walk, h * QC);
        for q in (0..kq / 2).map(|p| 2 * p) {
            let (aq, bq, bq1) = (a.add(q * MR), b.add(quads.next()), b.add(quads.next()));
            let av = [aq, aq.add(MR), aq.add(4), aq.add(MR + 4)].map(|p| vld1q_u32(p));
            let bv = [bq, bq1, bq.add(4), bq1.add(4)].map(|p| vld1q_u32(p));
            usmmla_pair::<A_U8>(&mut acc, av, bv);
        }
        if kq % 2 == 1 {
            // The last quad pairs with zeros.
            let (aq, bq) = (a.add((kq - 1) * MR), b.add(quads.next()));
            let av = [vld1q_u32(aq), zero, vld1q_u32(aq.add(4)), zero];
            let bv = [vld1q_u32(bq), zero, vld1q_u32(bq.add(4)), zero];
            usmmla_pair::<A_U8>(&mut acc, av, bv);
        }
        // To rows of 8 columns: [r c0..c3] and [r c4..c7] per row.
        let mut rows = [[vdupq_n_s32(0); 2]; MR];
        for (i, pair) in acc.iter().enumerate() {
            for half in 0..2 {
                let (x, y) = (pair[2 * half], pair[2 * half + 1]);
                let (r0, r1) = if A_U8 {
                    // [r0c0, r0c1, r1c0, r1c1]: the 64-bit halves are rows.
                    let (x, y) = (vreinterpretq_s64_s32(x), vreinterpretq_s64_s32(y));
                    (
                        vreinterpretq_s32_s64(vzip1q_s64(x, y)),
                        vreinterpretq_s32_s64(vzip2q_s64(x, y)),
                    )
                } else {
                    // [c0r0, c0r1, c1r0, c1r1]: even lanes are row 0.
                    (vuzp1q_s32(x, y), vuzp2q_s32(x, y))
                };
                rows[2 * i][half] = r0;
                rows[2 * i + 1][half] = r1;
            }
        }
        epilogue(&rows, h, 0, 0, c, ldc, t, accumulate);
    }
}

/// One pair of quads into a quarter's 4 x 4 accumulators: `av` holds A's
/// quads `q, q + 1` of rows 0-3, then of rows 4-7; `bv` B's of columns 0-3,
/// then 4-7.
#[inline(always)]
unsafe fn usmmla_pair<const A_U8: bool>(
    acc: &mut [[int32x4_t; 4]; 4],
    av: [uint32x4_t; 4],
    bv: [uint32x4_t; 4],
) {
    // [r0 q, r0 q+1, r1 q, r1 q+1]: two rows (columns) of eight bytes.
    let pairs = |v: [uint32x4_t; 4]| {
        [
            vzip1q_u32(v[0], v[1]),
            vzip2q_u32(v[0], v[1]),
            vzip1q_u32(v[2], v[3]),
            vzip2q_u32(v[2], v[3]),
        ]
        .map(|v| vreinterpretq_s8_u32(v))
    };
    let (ar, bc) = (pairs(av), pairs(bv));
    for (i, row) in acc.iter_mut().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = if A_U8 {
                usmmla(*v, ar[i], bc[j])
            } else {
                usmmla(*v, bc[j], ar[i])
            };
        }
    }
}

/// Quarter `h`'s sums (`acc[r]`: columns `8h..8h + 8` of row `r`) dequantized
/// into C: `(sum - (row_off + row_fix) * (col_off + col_fix)) * row_scale *
/// col_scale`, added to C or the row's bias; the f32 operations those of the
/// portable loop, so the results are the same bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn epilogue(
    acc: &[[int32x4_t; 2]; MR],
    h: usize,
    row_fix: i32,
    col_fix: i32,
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    accumulate: bool,
) {
    let c0 = h * QC;
    for (r, sums) in acc.iter().enumerate().take(t.rows) {
        let (ro, rs) = (t.row_off[r] - row_fix, t.row_scale[r]);
        let bias = t.row_bias.map_or(0.0, |b| b[r]);
        for (v, &s) in sums.iter().enumerate() {
            let j = c0 + 4 * v;
            if j >= t.cols {
                break;
            }
            let dst = c.add(r * ldc + j);
            if j + 4 <= t.cols {
                let co = vsubq_s32(vld1q_s32(t.col_off.as_ptr().add(j)), vdupq_n_s32(col_fix));
                let sum = vsubq_s32(s, vmulq_s32(vdupq_n_s32(ro), co));
                let scale = vmulq_f32(vdupq_n_f32(rs), vld1q_f32(t.col_scale.as_ptr().add(j)));
                let mut x = vmulq_f32(vcvtq_f32_s32(sum), scale);
                if accumulate {
                    x = vaddq_f32(vld1q_f32(dst), x);
                } else if t.row_bias.is_some() {
                    x = vaddq_f32(vdupq_n_f32(bias), x);
                }
                vst1q_f32(dst, x);
            } else {
                let mut lanes = [0i32; 4];
                vst1q_s32(lanes.as_mut_ptr(), s);
                for (l, &sum) in lanes.iter().enumerate().take(t.cols - j) {
                    let co = t.col_off[j + l] - col_fix;
                    let x =
                        sum.wrapping_sub(ro.wrapping_mul(co)) as f32 * (rs * t.col_scale[j + l]);
                    let d = dst.add(l);
                    *d = match (accumulate, t.row_bias) {
                        (true, _) => *d + x,
                        (false, Some(_)) => bias + x,
                        (false, None) => x,
                    };
                }
            }
        }
    }
}

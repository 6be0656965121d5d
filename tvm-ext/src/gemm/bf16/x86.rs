//! The AVX512-BF16 inner loop and packing.
use std::arch::x86_64::*;

use super::{MR, NR};
use crate::gemm::x86::store_halves;

#[inline(always)]
fn masks(cols: usize) -> (__mmask16, __mmask16) {
    let m = |n: usize| {
        if n >= 16 {
            0xffff
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    };
    (m(cols.min(16)), m(cols.saturating_sub(16)))
}

/// The `MR x NR` tile with `VDPBF16PS`: per pair, two B vectors and MR
/// broadcast pairs of A, 2·MR dot products.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile_native(
    kq: usize,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    let (m0, m1) = masks(cols);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    if accumulate {
        for (r, t) in acc.iter_mut().enumerate() {
            if r < rows {
                t[0] = _mm512_maskz_loadu_ps(m0, c.add(r * ldc));
                t[1] = _mm512_maskz_loadu_ps(m1, c.add(r * ldc + 16));
            }
        }
    }
    for q in 0..kq {
        let bq = b.add(q * NR);
        let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq as *const _));
        let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq.add(16) as *const _));
        let aq = a.add(q * MR);
        for (r, t) in acc.iter_mut().enumerate() {
            let ar: __m512bh = std::mem::transmute(_mm512_set1_epi32(*aq.add(r) as i32));
            t[0] = _mm512_dpbf16_ps(t[0], ar, b0);
            t[1] = _mm512_dpbf16_ps(t[1], ar, b1);
        }
    }
    for (r, t) in acc.iter().enumerate() {
        if r < rows {
            _mm512_mask_storeu_ps(c.add(r * ldc), m0, t[0]);
            _mm512_mask_storeu_ps(c.add(r * ldc + 16), m1, t[1]);
        }
    }
}

/// [`super::pack_pair`] with `VCVTNE2PS2BF16`: 16 pairs per step, stored
/// as two halves of 8 (a panel is 8 or 32 wide).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn pack_pair_native(
    lo: &[f32],
    hi: Option<&[f32]>,
    q: usize,
    kp: usize,
    width: usize,
    dst: &mut [u32],
) {
    let n = lo.len();
    let padded = n.div_ceil(width) * width;
    // Words 0..16 hold lo, 16..32 hi; interleave them into (lo, hi) pairs.
    let idx = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
        19, 3, 18, 2, 17, 1, 16, 0,
    );
    let mut j = 0;
    while j < padded {
        let left = n.saturating_sub(j).min(16);
        let m = if left >= 16 {
            0xffff
        } else {
            ((1u32 << left) - 1) as __mmask16
        };
        let at = j.min(n);
        let l = _mm512_maskz_loadu_ps(m, lo.as_ptr().add(at));
        let h = match hi {
            Some(h) => _mm512_maskz_loadu_ps(m, h.as_ptr().add(at)),
            None => _mm512_setzero_ps(),
        };
        let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(h, l));
        let out = _mm512_permutexvar_epi16(idx, both);
        store_halves(out, j, padded, q, kp, width, dst);
        j += 16;
    }
}

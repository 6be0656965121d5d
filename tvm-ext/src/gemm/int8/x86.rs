//! The AVX512-VNNI inner loop, and the AVX-512 quantization and packing.
use std::arch::x86_64::*;

use super::{Affine, Tile, Walk, MR};
use crate::gemm::x86::store_halves;

#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        ((1u32 << n) - 1) as __mmask16
    }
}

/// The `MR x NR` tile with `VPDPBUSD`, B's quads found by `walk`: per quad, two B vectors and MR
/// broadcast quads of A, 2·MR four-way dot products. `A_U8`: A holds the
/// unsigned bytes (else B does).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile_vnni<const A_U8: bool>(
    walk: &Walk,
    a: *const u32,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    accumulate: bool,
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; MR];
    let mut aq = a;
    for tap in 0..walk.taps {
        let mut bq = b.add(tap * walk.tap_step);
        for _ in 0..walk.per_tap {
            let b0 = _mm512_loadu_si512(bq as *const _);
            let b1 = _mm512_loadu_si512(bq.add(16) as *const _);
            for (r, s) in acc.iter_mut().enumerate() {
                let ar = _mm512_set1_epi32(*aq.add(r) as i32);
                if A_U8 {
                    s[0] = _mm512_dpbusd_epi32(s[0], ar, b0);
                    s[1] = _mm512_dpbusd_epi32(s[1], ar, b1);
                } else {
                    s[0] = _mm512_dpbusd_epi32(s[0], b0, ar);
                    s[1] = _mm512_dpbusd_epi32(s[1], b1, ar);
                }
            }
            bq = bq.add(walk.quad_step);
            aq = aq.add(MR);
        }
    }
    let (m0, m1) = (mask(t.cols), mask(t.cols.saturating_sub(16)));
    let cs = [
        _mm512_maskz_loadu_ps(m0, t.col_scale.as_ptr()),
        _mm512_maskz_loadu_ps(m1, t.col_scale.as_ptr().wrapping_add(16)),
    ];
    let co = [
        _mm512_maskz_loadu_epi32(m0, t.col_off.as_ptr()),
        _mm512_maskz_loadu_epi32(m1, t.col_off.as_ptr().wrapping_add(16)),
    ];
    for (r, s) in acc.iter().enumerate().take(t.rows) {
        let (ro, rs) = (
            _mm512_set1_epi32(t.row_off[r]),
            _mm512_set1_ps(t.row_scale[r]),
        );
        for (h, m) in [m0, m1].into_iter().enumerate() {
            let dst = c.add(r * ldc + 16 * h);
            let sum = _mm512_sub_epi32(s[h], _mm512_mullo_epi32(ro, co[h]));
            let mut v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(rs, cs[h]));
            if accumulate {
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), v);
            } else if let Some(b) = t.row_bias {
                v = _mm512_add_ps(_mm512_set1_ps(b[r]), v);
            }
            _mm512_mask_storeu_ps(dst, m, v);
        }
    }
}

/// The VNNI tile's epilogue for int32 sums held in memory (`sums[r]`: row `r`,
/// the AMX tiles store theirs there): dequantized into C as [`super::Tile`]
/// says, with the same operations as [`tile_vnni`], so the same bits. (One
/// function for both, taking the accumulators by reference, made the VNNI tile
/// 2x slower: its accumulators then lived in memory.)
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn store_sums_from(
    sums: &[[i32; 32]],
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    accumulate: bool,
) {
    let (m0, m1) = (mask(t.cols), mask(t.cols.saturating_sub(16)));
    let cs = [
        _mm512_maskz_loadu_ps(m0, t.col_scale.as_ptr()),
        _mm512_maskz_loadu_ps(m1, t.col_scale.as_ptr().wrapping_add(16)),
    ];
    let co = [
        _mm512_maskz_loadu_epi32(m0, t.col_off.as_ptr()),
        _mm512_maskz_loadu_epi32(m1, t.col_off.as_ptr().wrapping_add(16)),
    ];
    for (r, row) in sums.iter().enumerate().take(t.rows) {
        let (ro, rs) = (
            _mm512_set1_epi32(t.row_off[r]),
            _mm512_set1_ps(t.row_scale[r]),
        );
        for (h, m) in [m0, m1].into_iter().enumerate() {
            let dst = c.add(r * ldc + 16 * h);
            let s = _mm512_loadu_si512(row.as_ptr().add(16 * h) as *const _);
            let sum = _mm512_sub_epi32(s, _mm512_mullo_epi32(ro, co[h]));
            let mut v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(rs, cs[h]));
            if accumulate {
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), v);
            } else if let Some(b) = t.row_bias {
                v = _mm512_add_ps(_mm512_set1_ps(b[r]), v);
            }
            _mm512_mask_storeu_ps(dst, m, v);
        }
    }
}

/// [`super::min_max`], 16 lanes at a time.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn min_max_avx512(v: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let mut chunks = v.chunks_exact(16);
    for ch in &mut chunks {
        let x = _mm512_loadu_ps(ch.as_ptr());
        // Ordered as (acc, x): a NaN in x leaves the accumulator.
        lo = _mm512_min_ps(x, lo);
        hi = _mm512_max_ps(x, hi);
    }
    let rest = chunks.remainder();
    let x = _mm512_maskz_loadu_ps(mask(rest.len()), rest.as_ptr());
    lo = _mm512_min_ps(x, lo);
    hi = _mm512_max_ps(x, hi);
    (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi))
}

/// [`super::pack_quad`], 16 values per step, stored as two halves of 8 (a
/// panel is 8 or 32 wide). Quantizes as [`Affine::quantize`] does.
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn pack_quad_avx512(
    rows: [Option<&[f32]>; 4],
    n: usize,
    quant: Affine,
    q: usize,
    kq: usize,
    width: usize,
    dst: &mut [u32],
) {
    let padded = n.div_ceil(width) * width;
    let (inv, zero) = (_mm512_set1_ps(quant.inv), _mm512_set1_epi32(quant.zero));
    let (lo, hi) = (_mm512_setzero_si512(), _mm512_set1_epi32(255));
    let mut j = 0;
    while j < padded {
        let m = mask(n.saturating_sub(j));
        let at = j.min(n);
        let mut word = _mm512_setzero_si512();
        for (b, row) in rows.iter().enumerate() {
            let Some(row) = row else { continue };
            let x = _mm512_maskz_loadu_ps(m, row.as_ptr().add(at));
            // Rounds to nearest even (the default MXCSR mode), as round_ties_even.
            let v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x, inv)), zero);
            let v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
            let v = _mm512_maskz_mov_epi32(m, v);
            word = _mm512_or_si512(word, _mm512_sllv_epi32(v, _mm512_set1_epi32(8 * b as i32)));
        }
        store_halves(word, j, padded, q, kq, width, dst);
        j += 16;
    }
}

/// [`super::quantize_row`], 16 values per step: as [`Affine::quantize`]
/// (round to nearest even, then the zero point; VPMOVUSDB saturates above 255).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn quantize_row_avx512(src: &[f32], quant: Affine, dst: &mut [u8]) {
    let (inv, zero, lo) = (
        _mm512_set1_ps(quant.inv),
        _mm512_set1_epi32(quant.zero),
        _mm512_setzero_si512(),
    );
    let mut j = 0;
    while j < src.len() {
        let m = mask(src.len() - j);
        let x = _mm512_maskz_loadu_ps(m, src.as_ptr().add(j));
        let v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(x, inv)), zero);
        let v = _mm512_max_epi32(v, lo);
        _mm512_mask_cvtusepi32_storeu_epi8(dst.as_mut_ptr().add(j) as *mut i8, m, v);
        j += 16;
    }
}

/// [`super::interleave_quad`], 16 words per step: each row's bytes widened
/// and shifted to their byte of the word.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn interleave_quad_avx512(rows: [&[u8]; 4], dst: &mut [u32]) {
    let mut p = 0;
    while p < dst.len() {
        let m = mask(dst.len() - p);
        let mut word = _mm512_setzero_si512();
        for (b, row) in rows.iter().enumerate() {
            let bytes = _mm_maskz_loadu_epi8(m, row.as_ptr().add(p) as *const i8);
            let v = _mm512_cvtepu8_epi32(bytes);
            word = _mm512_or_si512(word, _mm512_sllv_epi32(v, _mm512_set1_epi32(8 * b as i32)));
        }
        _mm512_mask_storeu_epi32(dst.as_mut_ptr().add(p) as *mut i32, m, word);
        p += 16;
    }
}

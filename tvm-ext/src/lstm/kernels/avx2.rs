//! AVX2+FMA kernels.
use std::arch::x86_64::*;

use super::NB;

/// One sequence, eight accumulators of eight lanes per panel.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn matvec1(
    w: *const f32,
    hidden: usize,
    panels: usize,
    init: *const f32,
    h: *const f32,
    out: *mut f32,
) {
    for p in 0..panels {
        let wp = w.add(p * hidden * NB);
        let ip = init.add(p * NB);
        let mut acc = [_mm256_setzero_ps(); 8];
        for (q, a) in acc.iter_mut().enumerate() {
            *a = _mm256_loadu_ps(ip.add(8 * q));
        }
        for k in 0..hidden {
            let r = wp.add(k * NB);
            let x = _mm256_set1_ps(*h.add(k));
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm256_fmadd_ps(_mm256_loadu_ps(r.add(8 * q)), x, *a);
            }
        }
        let op = out.add(p * NB);
        for (q, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(op.add(8 * q), *a);
        }
    }
}

/// Writes the transpose of the 8x8 block at `src` (row stride `ss`) to `dst`
/// (row stride `ds`).
#[target_feature(enable = "avx2")]
pub(in crate::lstm) unsafe fn transpose8(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    let r = |i: usize| _mm256_loadu_ps(src.add(i * ss));
    let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
    let t0 = _mm256_unpacklo_ps(r0, r1);
    let t1 = _mm256_unpackhi_ps(r0, r1);
    let t2 = _mm256_unpacklo_ps(r2, r3);
    let t3 = _mm256_unpackhi_ps(r2, r3);
    let t4 = _mm256_unpacklo_ps(r4, r5);
    let t5 = _mm256_unpackhi_ps(r4, r5);
    let t6 = _mm256_unpacklo_ps(r6, r7);
    let t7 = _mm256_unpackhi_ps(r6, r7);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps::<0x20>(s0, s4));
    _mm256_storeu_ps(dst.add(ds), _mm256_permute2f128_ps::<0x20>(s1, s5));
    _mm256_storeu_ps(dst.add(2 * ds), _mm256_permute2f128_ps::<0x20>(s2, s6));
    _mm256_storeu_ps(dst.add(3 * ds), _mm256_permute2f128_ps::<0x20>(s3, s7));
    _mm256_storeu_ps(dst.add(4 * ds), _mm256_permute2f128_ps::<0x31>(s0, s4));
    _mm256_storeu_ps(dst.add(5 * ds), _mm256_permute2f128_ps::<0x31>(s1, s5));
    _mm256_storeu_ps(dst.add(6 * ds), _mm256_permute2f128_ps::<0x31>(s2, s6));
    _mm256_storeu_ps(dst.add(7 * ds), _mm256_permute2f128_ps::<0x31>(s3, s7));
}

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
    super::cell_body(g, c, h)
}

//! The row loops compiled for AVX-512 / AVX2+FMA. LLVM vectorizes the
//! element-wise loops by itself, but not an f64 sum of f32 data (a
//! floating-point reduction it may not reorder), so that one is spelled out.
use std::arch::x86_64::*;

use super::{row, shifted_sums, Activation, RowParams};

#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn row_avx512(x: &[f32], y: &mut [f32], p: &RowParams, act: Activation) {
    row(x, y, p, act, |x, k| unsafe { sums_avx512(x, k) })
}

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn row_avx2(x: &[f32], y: &mut [f32], p: &RowParams, act: Activation) {
    row(x, y, p, act, |x, k| unsafe { sums_avx2(x, k) })
}

/// [`shifted_sums`], 16 elements per step in four f64 accumulators.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn sums_avx512(x: &[f32], k: f64) -> (f64, f64) {
    let kv = _mm512_set1_pd(k);
    let (mut s0, mut s1, mut q0, mut q1) = (
        _mm512_setzero_pd(),
        _mm512_setzero_pd(),
        _mm512_setzero_pd(),
        _mm512_setzero_pd(),
    );
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        let a = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(c.as_ptr())), kv);
        let b = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(c.as_ptr().add(8))), kv);
        s0 = _mm512_add_pd(s0, a);
        s1 = _mm512_add_pd(s1, b);
        q0 = _mm512_fmadd_pd(a, a, q0);
        q1 = _mm512_fmadd_pd(b, b, q1);
    }
    let (ts, tq) = shifted_sums(chunks.remainder(), k);
    (
        _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) + ts,
        _mm512_reduce_add_pd(_mm512_add_pd(q0, q1)) + tq,
    )
}

/// [`shifted_sums`], 8 elements per step in four f64 accumulators.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn sums_avx2(x: &[f32], k: f64) -> (f64, f64) {
    let kv = _mm256_set1_pd(k);
    let (mut s0, mut s1, mut q0, mut q1) = (
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
        _mm256_setzero_pd(),
    );
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        let a = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(c.as_ptr())), kv);
        let b = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(c.as_ptr().add(4))), kv);
        s0 = _mm256_add_pd(s0, a);
        s1 = _mm256_add_pd(s1, b);
        q0 = _mm256_fmadd_pd(a, a, q0);
        q1 = _mm256_fmadd_pd(b, b, q1);
    }
    let (ts, tq) = shifted_sums(chunks.remainder(), k);
    let mut lanes = [[0.0f64; 4]; 2];
    _mm256_storeu_pd(lanes[0].as_mut_ptr(), _mm256_add_pd(s0, s1));
    _mm256_storeu_pd(lanes[1].as_mut_ptr(), _mm256_add_pd(q0, q1));
    (
        lanes[0].iter().sum::<f64>() + ts,
        lanes[1].iter().sum::<f64>() + tq,
    )
}

//! The Winograd convolution's x86-64 code: the job compiled for AVX-512 and
//! AVX2 (the transforms' loops vectorized by LLVM for each), and the
//! AVX-512 shuffles between tiles and lanes (`lanes.rs`).
use std::arch::x86_64::*;

use super::kernel::sized;
use super::{Call, Job, LANES};
use crate::job::JobError;
use crate::scratch::Scratch;

// The job (`kernel.rs`).

#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn avx512(
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> Result<(), JobError> {
    sized::<true, true>(call, job, s, par)
}

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn avx2(
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> Result<(), JobError> {
    sized::<true, false>(call, job, s, par)
}

// The lane shuffles (`lanes.rs`).

// Element `e` of the flat sequence sits in vector `e / LANES`, lane
// `e % LANES`, and in row `e % M`, lane `e / M`. Each output vector
// takes its lanes from up to `M` input vectors, one masked permute
// each, with indices and masks that are constants per `M`.

/// Row `i`, lane `k` is lane `(k*M + i) % LANES` of vector `(k*M + i) / LANES`.
const fn split_tables<const M: usize>() -> ([[i32; LANES]; M], [[u16; M]; M]) {
    let (mut index, mut mask) = ([[0; LANES]; M], [[0; M]; M]);
    let mut i = 0;
    while i < M {
        let mut k = 0;
        while k < LANES {
            let e = k * M + i;
            index[i][k] = (e % LANES) as i32;
            mask[i][e / LANES] |= 1 << k;
            k += 1;
        }
        i += 1;
    }
    (index, mask)
}

/// Vector `j`, lane `t` is lane `(LANES*j + t) / M` of row `(LANES*j + t) % M`.
const fn merge_tables<const M: usize>() -> ([[i32; LANES]; M], [[u16; M]; M]) {
    let (mut index, mut mask) = ([[0; LANES]; M], [[0; M]; M]);
    let mut j = 0;
    while j < M {
        let mut t = 0;
        while t < LANES {
            let e = LANES * j + t;
            index[j][t] = (e / M) as i32;
            mask[j][e % M] |= 1 << t;
            t += 1;
        }
        j += 1;
    }
    (index, mask)
}

#[target_feature(enable = "avx512f")]
pub(super) unsafe fn split<const M: usize>(flat: &[f32]) -> [[f32; LANES]; M] {
    let (index, mask) = const { split_tables::<M>() };
    let v: [__m512; M] = std::array::from_fn(|j| _mm512_loadu_ps(flat.as_ptr().add(LANES * j)));
    let mut rows = [[0.0f32; LANES]; M];
    for (i, row) in rows.iter_mut().enumerate() {
        let idx = _mm512_loadu_si512(index[i].as_ptr().cast());
        let mut r = _mm512_setzero_ps();
        for (vj, &m) in v.iter().zip(&mask[i]) {
            if m != 0 {
                r = _mm512_mask_permutexvar_ps(r, m, idx, *vj);
            }
        }
        _mm512_storeu_ps(row.as_mut_ptr(), r);
    }
    rows
}

#[target_feature(enable = "avx512f")]
pub(super) unsafe fn merge<const M: usize>(rows: &[[f32; LANES]; M], add: f32, flat: &mut [f32]) {
    let (index, mask) = const { merge_tables::<M>() };
    let add = _mm512_set1_ps(add);
    let r: [__m512; M] =
        std::array::from_fn(|i| _mm512_add_ps(_mm512_loadu_ps(rows[i].as_ptr()), add));
    for j in 0..M {
        let idx = _mm512_loadu_si512(index[j].as_ptr().cast());
        let mut v = _mm512_setzero_ps();
        for (ri, &m) in r.iter().zip(&mask[j]) {
            if m != 0 {
                v = _mm512_mask_permutexvar_ps(v, m, idx, *ri);
            }
        }
        _mm512_storeu_ps(flat.as_mut_ptr().add(LANES * j), v);
    }
}

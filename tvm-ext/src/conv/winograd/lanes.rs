//! Between `LANES * M` consecutive values (`flat[k * M + i]`) and `M` rows of
//! `LANES` (`rows[i][k]`): how the tiles' inputs are split by position in the
//! tile and their outputs merged back. Scalar loops, or (`SIMD`) `M * M`
//! masked lane permutes with AVX-512, or NEON's interleaving loads and stores
//! (`ld2`/`ld4`, `ld3` and `uzp` for `M` = 6): a scalar loop here cost as much
//! as the GEMMs at 128 channels.
use super::LANES;

/// `rows[i][k] = flat[k * M + i]` for `flat` of `LANES * M` values.
#[inline(always)]
pub(super) fn split<const M: usize, const SIMD: bool>(flat: &[f32]) -> [[f32; LANES]; M] {
    let flat = &flat[..LANES * M];
    #[cfg(target_arch = "x86_64")]
    if SIMD {
        // SAFETY: `SIMD` is only set in code compiled for AVX-512; `flat` has `LANES * M` values.
        return unsafe { x86::split::<M>(flat) };
    }
    #[cfg(target_arch = "aarch64")]
    if SIMD {
        // SAFETY: NEON is aarch64's baseline; `flat` has `LANES * M` values.
        if let Some(rows) = unsafe { neon::split::<M>(flat) } {
            return rows;
        }
    }
    std::array::from_fn(|i| std::array::from_fn(|k| flat[k * M + i]))
}

/// `flat[k * M + i] = rows[i][k] + add` for `flat` of `LANES * M` values.
#[inline(always)]
pub(super) fn merge<const M: usize, const SIMD: bool>(
    rows: &[[f32; LANES]; M],
    add: f32,
    flat: &mut [f32],
) {
    let flat = &mut flat[..LANES * M];
    #[cfg(target_arch = "x86_64")]
    if SIMD {
        // SAFETY: as in `split`.
        return unsafe { x86::merge::<M>(rows, add, flat) };
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as in `split`.
    if SIMD && unsafe { neon::merge::<M>(rows, add, flat) } {
        return;
    }
    for (e, v) in flat.iter_mut().enumerate() {
        *v = rows[e % M][e / M] + add;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::LANES;
    use std::arch::x86_64::*;

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
    pub(super) unsafe fn merge<const M: usize>(
        rows: &[[f32; LANES]; M],
        add: f32,
        flat: &mut [f32],
    ) {
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
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use super::LANES;
    use std::arch::aarch64::*;

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
                    for (i, (a, b)) in [(a.0, b.0), (a.1, b.1), (a.2, b.2)].into_iter().enumerate()
                    {
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
                    let a =
                        float32x4x3_t(vzip1q_f32(r0, r3), vzip1q_f32(r1, r4), vzip1q_f32(r2, r5));
                    let b =
                        float32x4x3_t(vzip2q_f32(r0, r3), vzip2q_f32(r1, r4), vzip2q_f32(r2, r5));
                    vst3q_f32(at, a);
                    vst3q_f32(at.add(12), b);
                }
            }
        }
        true
    }
}

//! The LSTM's x86-64 code: the recurrent mat-vec products and the cell update
//! compiled for AVX2+FMA (`avx2`) and for AVX-512 (`avx512`).

/// AVX2+FMA kernels.
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    use super::super::NB;

    /// One sequence, eight accumulators of eight lanes per panel.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::lstm) unsafe fn matvec1(
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
    pub(in crate::lstm) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
        super::super::cell_body(g, c, h)
    }
}

/// AVX-512 kernels.
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    use super::super::NB;

    /// One sequence; two interleaved accumulator sets hide the FMA latency.
    #[target_feature(enable = "avx512f")]
    pub(in crate::lstm) unsafe fn matvec1(
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
            let mut a0 = _mm512_loadu_ps(ip);
            let mut a1 = _mm512_loadu_ps(ip.add(16));
            let mut a2 = _mm512_loadu_ps(ip.add(32));
            let mut a3 = _mm512_loadu_ps(ip.add(48));
            let mut b0 = _mm512_setzero_ps();
            let mut b1 = _mm512_setzero_ps();
            let mut b2 = _mm512_setzero_ps();
            let mut b3 = _mm512_setzero_ps();
            let mut k = 0;
            while k + 2 <= hidden {
                let r = wp.add(k * NB);
                let x0 = _mm512_set1_ps(*h.add(k));
                let x1 = _mm512_set1_ps(*h.add(k + 1));
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r), x0, a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(16)), x0, a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(32)), x0, a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(48)), x0, a3);
                b0 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(64)), x1, b0);
                b1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(80)), x1, b1);
                b2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(96)), x1, b2);
                b3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(112)), x1, b3);
                k += 2;
            }
            if k < hidden {
                let r = wp.add(k * NB);
                let x0 = _mm512_set1_ps(*h.add(k));
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r), x0, a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(16)), x0, a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(32)), x0, a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(48)), x0, a3);
            }
            let op = out.add(p * NB);
            _mm512_storeu_ps(op, _mm512_add_ps(a0, b0));
            _mm512_storeu_ps(op.add(16), _mm512_add_ps(a1, b1));
            _mm512_storeu_ps(op.add(32), _mm512_add_ps(a2, b2));
            _mm512_storeu_ps(op.add(48), _mm512_add_ps(a3, b3));
        }
    }

    /// `S` sequences share each load of the weights. Each sequence sums in
    /// [`matvec1`]'s order (even `k` onto `init`, odd `k` from zero, the two added
    /// last), so a sequence gives the same bits alone or beside others in a batch.
    /// A panel goes in two halves of 32 gates: 2 × 2 × `S` accumulators and four
    /// weight registers fit the 32 registers for `S` up to 4.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f")]
    pub(in crate::lstm) unsafe fn matvec<const S: usize>(
        w: *const f32,
        hidden: usize,
        panels: usize,
        init: [*const f32; S],
        h: [*const f32; S],
        out: [*mut f32; S],
    ) {
        for p in 0..panels {
            let wp = w.add(p * hidden * NB);
            for half in [0, 32] {
                let mut even = [[_mm512_setzero_ps(); 2]; S];
                let mut odd = [[_mm512_setzero_ps(); 2]; S];
                for s in 0..S {
                    for q in 0..2 {
                        even[s][q] = _mm512_loadu_ps(init[s].add(p * NB + half + 16 * q));
                    }
                }
                let mut k = 0;
                while k + 2 <= hidden {
                    let r0 = wp.add(k * NB + half);
                    let r1 = r0.add(NB);
                    let (w0, w1) = (_mm512_loadu_ps(r0), _mm512_loadu_ps(r0.add(16)));
                    let (v0, v1) = (_mm512_loadu_ps(r1), _mm512_loadu_ps(r1.add(16)));
                    for s in 0..S {
                        let x0 = _mm512_set1_ps(*h[s].add(k));
                        let x1 = _mm512_set1_ps(*h[s].add(k + 1));
                        even[s][0] = _mm512_fmadd_ps(w0, x0, even[s][0]);
                        even[s][1] = _mm512_fmadd_ps(w1, x0, even[s][1]);
                        odd[s][0] = _mm512_fmadd_ps(v0, x1, odd[s][0]);
                        odd[s][1] = _mm512_fmadd_ps(v1, x1, odd[s][1]);
                    }
                    k += 2;
                }
                if k < hidden {
                    let r0 = wp.add(k * NB + half);
                    let (w0, w1) = (_mm512_loadu_ps(r0), _mm512_loadu_ps(r0.add(16)));
                    for s in 0..S {
                        let x0 = _mm512_set1_ps(*h[s].add(k));
                        even[s][0] = _mm512_fmadd_ps(w0, x0, even[s][0]);
                        even[s][1] = _mm512_fmadd_ps(w1, x0, even[s][1]);
                    }
                }
                for s in 0..S {
                    for q in 0..2 {
                        let sum = _mm512_add_ps(even[s][q], odd[s][q]);
                        _mm512_storeu_ps(out[s].add(p * NB + half + 16 * q), sum);
                    }
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(in crate::lstm) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
        super::super::cell_body(g, c, h)
    }
}

//! The peaks' loops on AVX-512: f32 FMA, `VDPBF16PS` and `VPDPBUSD`, 12
//! independent accumulators each.
use std::arch::x86_64::*;
use std::hint::black_box;

const ACC: usize = 12;

#[target_feature(enable = "avx512f")]
unsafe fn fma(reps: u64) -> u64 {
    let mut acc = [_mm512_setzero_ps(); ACC];
    let (a, b) = (
        _mm512_set1_ps(black_box(0.999)),
        _mm512_set1_ps(black_box(1e-7)),
    );
    for _ in 0..reps {
        for s in acc.iter_mut() {
            *s = _mm512_fmadd_ps(*s, a, b);
        }
    }
    black_box(acc);
    reps * ACC as u64 * 16 * 2
}

#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn bf16(reps: u64) -> u64 {
    let mut acc = [_mm512_setzero_ps(); ACC];
    let one = _mm512_set1_ps(black_box(1e-3));
    let (a, b) = (_mm512_cvtne2ps_pbh(one, one), _mm512_cvtne2ps_pbh(one, one));
    for _ in 0..reps {
        for s in acc.iter_mut() {
            *s = _mm512_dpbf16_ps(*s, a, b);
        }
    }
    black_box(acc);
    reps * ACC as u64 * 16 * 4
}

#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn int8(reps: u64) -> u64 {
    let mut acc = [_mm512_setzero_si512(); ACC];
    let (a, b) = (
        _mm512_set1_epi8(black_box(3)),
        _mm512_set1_epi8(black_box(-2)),
    );
    for _ in 0..reps {
        for s in acc.iter_mut() {
            *s = _mm512_dpbusd_epi32(*s, a, b);
        }
    }
    black_box(acc);
    reps * ACC as u64 * 16 * 8
}

pub(super) fn fma_safe(reps: u64) -> u64 {
    // SAFETY: called only where `Isa::Avx512` is available (`super::measure`).
    unsafe { fma(reps) }
}
pub(super) fn bf16_safe(reps: u64) -> u64 {
    // SAFETY: as above, `Isa::Avx512Bf16`.
    unsafe { bf16(reps) }
}
pub(super) fn int8_safe(reps: u64) -> u64 {
    // SAFETY: as above, `Isa::Avx512Vnni`.
    unsafe { int8(reps) }
}

//! The peaks' loops on AVX-512: f32 FMA, `VDPBF16PS` and `VPDPBUSD`, 12
//! independent accumulators each; and AMX's tile products, the AMX loop's own.
use std::arch::x86_64::*;
use std::hint::black_box;

use crate::gemm::amx::x86::Hardware;
use crate::gemm::amx::{Dot, Tiles};

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

/// `reps` rounds of the AMX loop's step without its loads: four tile products
/// (`dot`) into the four accumulators, the tile unit's rate.
///
/// # Safety
/// The process holds the tile state and the CPU runs `dot` (`Isa::AmxInt8` or `Isa::AmxBf16` detected).
unsafe fn amx(reps: u64, dot: Dot) -> u64 {
    let mut tiles = Hardware;
    tiles.start();
    tiles.zero();
    for _ in 0..reps {
        tiles.multiply(dot);
    }
    tiles.finish();
    // Four products of 16 x 16 outputs over 64 bytes of K: 64 int8 or 32 bf16 multiply-adds each.
    let k = if dot == Dot::Bf16 { 32 } else { 64 };
    reps * 4 * 16 * 16 * k * 2
}

pub(super) fn amx_int8_safe(reps: u64) -> u64 {
    // SAFETY: called only where `Isa::AmxInt8` is detected (mod.rs).
    unsafe { amx(reps, Dot::SignedUnsigned) }
}

pub(super) fn amx_bf16_safe(reps: u64) -> u64 {
    // SAFETY: called only where `Isa::AmxBf16` is detected (mod.rs).
    unsafe { amx(reps, Dot::Bf16) }
}

//! The AMX tile instructions, as inline assembly: Rust's AMX intrinsics and
//! target features are unstable, and LLVM's assembler takes the mnemonics
//! without them. The compiler never allocates tile registers, so they keep
//! their values between the `asm!` blocks of one thread.
use std::arch::asm;
use std::arch::x86_64::*;

use super::{Dot, Sums, Tiles, TILE};
use crate::gemm::packed::{MR, NR};

/// Palette 1, every tile 16 rows of 64 bytes (LDTILECFG's 64-byte layout:
/// byte 0 the palette, bytes 16-31 the bytes per row of tiles 0-7 as u16,
/// bytes 48-55 their rows).
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = TILE as u8;
        t += 1;
    }
    Config(c)
};

/// The tiles of this thread; only where `Isa::AmxInt8` (for the int8
/// products) or `Isa::AmxBf16` (for bf16) is detected: the process holds the tile state.
#[derive(Default)]
pub(crate) struct Hardware;

impl Tiles for Hardware {
    unsafe fn start(&mut self) {
        asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly, preserves_flags));
    }

    unsafe fn zero(&mut self) {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack, nomem, preserves_flags)
        );
    }

    unsafe fn load_a(&mut self, h: usize, p: *const u32) {
        let stride = 4 * TILE;
        match h {
            0 => {
                asm!("tileloadd tmm4, [{}+{}]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
            }
            _ => {
                asm!("tileloadd tmm5, [{}+{}]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
            }
        }
    }

    unsafe fn load_b(&mut self, v: usize, p: *const u32, stride: usize) {
        let stride = 4 * stride;
        match v {
            0 => {
                asm!("tileloadd tmm6, [{}+{}]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
            }
            _ => {
                asm!("tileloadd tmm7, [{}+{}]", in(reg) p, in(reg) stride, options(nostack, readonly, preserves_flags))
            }
        }
    }

    unsafe fn multiply(&mut self, dot: Dot) {
        match dot {
            Dot::SignedUnsigned => asm!(
                "tdpbsud tmm0, tmm4, tmm6",
                "tdpbsud tmm1, tmm4, tmm7",
                "tdpbsud tmm2, tmm5, tmm6",
                "tdpbsud tmm3, tmm5, tmm7",
                options(nostack, nomem, preserves_flags)
            ),
            Dot::UnsignedSigned => asm!(
                "tdpbusd tmm0, tmm4, tmm6",
                "tdpbusd tmm1, tmm4, tmm7",
                "tdpbusd tmm2, tmm5, tmm6",
                "tdpbusd tmm3, tmm5, tmm7",
                options(nostack, nomem, preserves_flags)
            ),
            Dot::Bf16 => asm!(
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                options(nostack, nomem, preserves_flags)
            ),
        }
    }

    unsafe fn store(&mut self, sums: &mut Sums) {
        let (p, stride) = (sums.as_mut_ptr() as *mut u32, 4 * NR);
        let (lower, right) = (p.add(TILE * NR), TILE);
        asm!(
            "tilestored [{p}+{s}], tmm0",
            "tilestored [{r}+{s}], tmm1",
            "tilestored [{l}+{s}], tmm2",
            "tilestored [{lr}+{s}], tmm3",
            p = in(reg) p,
            r = in(reg) p.add(right),
            l = in(reg) lower,
            lr = in(reg) lower.add(right),
            s = in(reg) stride,
            options(nostack, preserves_flags)
        );
    }

    unsafe fn finish(&mut self) {
        asm!("tilerelease", options(nostack, nomem, preserves_flags));
    }

    fn transpose_block(src: &[u32], dst: &mut [u32]) {
        assert!(src.len() >= TILE * MR && dst.len() >= MR * TILE);
        // SAFETY: a CPU with AMX has AVX-512F; the lengths are checked above.
        unsafe { transpose_block_avx512(src.as_ptr(), dst.as_mut_ptr()) }
    }
}

/// [`Tiles::transpose_block`] by gathers: row `r` of the tile is words `r`,
/// `r + MR`, `r + 2 MR`, ... of the panel (the scalar loop was a third of a
/// bf16 GEMM's time at Kokoro's shapes).
#[target_feature(enable = "avx512f")]
unsafe fn transpose_block_avx512(src: *const u32, dst: *mut u32) {
    let column = _mm512_setr_epi32(
        0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120,
    );
    for r in 0..MR {
        let at = _mm512_add_epi32(column, _mm512_set1_epi32(r as i32));
        let row = _mm512_i32gather_epi32::<4>(at, src as *const i32);
        _mm512_storeu_si512(dst.add(r * TILE) as *mut _, row);
    }
}
